"""The hosts `llamactl fleet status` asks, and asking them all at once.

Hosts are the local daemon (when it answers on its socket), `[fleet] peers`, tagged
Tailscale peers and, with --discover, what mDNS finds. Each is asked in its own daemon
thread with a per-host timeout, and the command stops waiting at the deadline whatever
the threads are doing, so one dead host can never hang it.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

from llamad.client.http import AuthError, Client, ClientError, Unreachable, find_socket
from llamad.fleet import peers

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from collections.abc import Callable
    from typing import Any

SLACK_S = 0.25  # past the per-host timeout, before a silent host is given up on
DISCOVER_S = 1.0


@dataclass
class Host:
    """One daemon to ask, then what it said (status) or why not (error)."""

    name: str
    where: str
    source: str
    connect: Callable[[], Client] | None
    status: dict[str, Any] | None = None
    error: str | None = None
    unreachable: bool = False
    refused: bool = False  # it answered, refusing the token

    @property
    def stranger(self) -> bool:
        """Found by mDNS and refusing our token: someone else's llamad, not our fleet's."""
        return self.source == "mdns" and self.refused


def hosts_of(args: argparse.Namespace, fleet: peers.Fleet, timeout: float) -> list[Host]:
    """The local daemon, the configured and Tailscale peers and, with --discover, what
    mDNS finds: each with how to connect to it."""
    socket_path = find_socket(args.socket, args.config)
    hosts = [Host("local", str(socket_path), "local", lambda: Client(socket_path, timeout))]
    found = list(fleet.peers)
    found += [p for p in peers.tailscale_peers(fleet) if p.name not in {f.name for f in found}]
    fallback = Path(args.token_file).expanduser() if args.token_file else fleet.token_file
    if args.discover or fleet.discover:
        urls = {f.url for f in found}
        found += [p for p in _discover(args, fleet, fallback) if p.url not in urls]
    for peer in found:
        if peer.token_file is None and fallback is not None:
            peer = dataclasses.replace(peer, token_file=fallback)
        connect = None if peer.error else _connector(peer, timeout)
        hosts.append(Host(peer.name, peer.url, peer.source, connect, error=peer.error))
    return hosts


def _connector(peer: peers.Peer, timeout: float) -> Callable[[], Client]:
    return lambda: peer.client(timeout)


def _discover(
    args: argparse.Namespace, fleet: peers.Fleet, token_file: Path | None
) -> list[peers.Peer]:
    try:
        from llamad.fleet.discovery import browse  # zeroconf: paid for by --discover only

        found = browse(DISCOVER_S, args.mdns_interface or fleet.mdns_interface)
    except ModuleNotFoundError as exc:
        if exc.name not in ("zeroconf", "ifaddr"):
            raise
        print("llamactl: --discover needs zeroconf (pip install zeroconf)", file=sys.stderr)
        return []
    except Exception as exc:  # mDNS is best effort: the configured hosts still get asked
        print(f"llamactl: mDNS browse failed: {exc or type(exc).__name__}", file=sys.stderr)
        return []
    ca_file = Path(args.ca_file).expanduser() if args.ca_file else None
    return [peers.Peer(f.name, f.url, token_file, ca_file, "mdns") for f in found]


def query(hosts: list[Host], timeout: float) -> None:
    """Fill in each host's status or error, all at once, within timeout + SLACK_S."""
    done = threading.Condition()
    answers: dict[int, tuple[dict[str, Any] | None, str | None, bool, bool]] = {}

    def ask(index: int, connect: Callable[[], Client]) -> None:
        try:
            answer: tuple[dict[str, Any] | None, str | None, bool, bool] = (
                connect().call("GET", "/v1/status", timeout=timeout),
                None,
                False,
                False,
            )
        except Unreachable as exc:
            answer = (None, str(exc), True, False)
        except AuthError as exc:
            answer = (None, str(exc), False, True)
        except ClientError as exc:
            answer = (None, str(exc), False, False)
        with done:  # a thread that answers after the deadline writes where no one reads
            answers[index] = answer
            done.notify()

    for index, host in enumerate(hosts):
        if host.connect is not None:
            args = (index, host.connect)
            threading.Thread(target=ask, args=args, daemon=True, name=host.name).start()
    asked = sum(h.connect is not None for h in hosts)
    with done:
        done.wait_for(lambda: len(answers) == asked, timeout=timeout + SLACK_S)
        final, answers = dict(answers), {}
    for index, host in enumerate(hosts):
        if host.connect is None:
            host.unreachable = True  # known unreachable without asking (offline)
        elif index in final:
            host.status, host.error, host.unreachable, host.refused = final[index]
        else:
            host.error = f"cannot reach llamad at {host.where} (no answer within {timeout:g}s)"
            host.unreachable = True
