"""The gateway's fleet beyond `[fleet] peers`: tagged tailnet peers (a stand-in
`tailscale` on PATH) and, with `[fleet] discover = true`, mDNS peers on loopback."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import socket
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path

import httpx
import pytest
import structlog
from fleet_helpers import GW_KEY_B, Host, start_a, start_b
from helpers import free_port, short_dir, wait_for
from remote_helpers import ADMIN, READ, loopback_multicast_works, write_token

from llamad.config.remote import Remote
from llamad.fleet.mdns_net import local_addresses
from llamad.fleet.peer_api import get_json
from llamad.fleet.peers import identity
from llamad.fleet.table import Fleet, Peer
from llamad.gateway.fleet import hosts as fleet_hosts
from llamad.gateway.fleet.hosts import FleetHosts
from llamad.gateway.fleet.models import FleetModels

# Two daemons and three llama-servers on a busy 2-core machine: more than the default.
pytestmark = pytest.mark.timeout(150)

CHAT = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}


def _tailscale(bin_dir: Path, status: dict[str, object] | None) -> dict[str, str]:
    """A stand-in `tailscale` first on PATH: prints `status` for `status --json`, or
    fails (exit 1, a word on stderr) for None. Returns the env to run llamad with."""
    bin_dir.mkdir()
    exe = bin_dir / "tailscale"
    if status is None:
        exe.write_text('#!/bin/sh\necho "tailscaled is not running" >&2\nexit 1\n')
    else:
        canned = bin_dir / "status.json"
        canned.write_text(json.dumps(status))
        exe.write_text(f'#!/bin/sh\n[ "$1 $2" = "status --json" ] || exit 9\ncat "{canned}"\n')
    exe.chmod(0o755)
    return {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


def _keys(base: Path) -> dict[str, Path]:
    """`[fleet]` defaults that discovered peers use: B's read token and gateway key."""
    return {
        "token_file": write_token(base / "fleet-read.token", READ),
        "gateway_key_file": write_token(base / "fleet-gw.key", GW_KEY_B),
    }


@pytest.fixture
def b(tiny_model: Path) -> Iterator[Host]:
    host = start_b(tiny_model, advertise=True)
    try:
        yield host
    finally:
        host.ld.close()


def _serves(a: Host, model: str) -> None:
    answer = httpx.post(f"{a.gateway}/v1/chat/completions", json={"model": model, **CHAT})
    assert answer.status_code == 200, answer.text


def test_a_tagged_tailnet_peer_is_routed_to(tiny_model: Path, b: Host) -> None:
    """`tailscale status --json` lists B with the tag: A's gateway serves B's model under
    B's tailnet name, with `[fleet]`'s token and gateway key."""
    status = {
        "Peer": {
            "nodekey:b": {
                "HostName": "studio",
                "TailscaleIPs": ["127.0.0.1"],
                "Tags": ["tag:llamad"],
                "Online": True,
            },
            "nodekey:phone": {"HostName": "phone", "TailscaleIPs": ["127.0.0.9"]},
        }
    }
    env = _tailscale(b.dir / "bin", status)
    fleet = {"tailscale_tag": "tag:llamad", "tailscale_port": b.control_port, **_keys(b.dir)}
    a = start_a(tiny_model, fleet, env=env)
    try:
        wait_for(lambda: "bonly" in a.models(), 15, "A learning B's models over the tailnet")
        assert a.models()["bonly"]["owned_by"] == "llamad@studio"
        assert a.models()["both"]["owned_by"] == "llamad"  # local first
        _serves(a, "bonly")
        assert not a.ld.events("gateway.tailscale_failed")
        assert a.ld.stop() == 0
    finally:
        a.ld.close()


def test_a_failing_tailscale_leaves_the_gateway_serving(tiny_model: Path) -> None:
    """tailscale fails: logged once, and A's gateway serves its own models."""
    env = _tailscale(short_dir() / "bin", None)
    a = start_a(tiny_model, {"tailscale_tag": "tag:llamad"}, env=env)
    try:
        [event] = a.ld.wait_event("gateway.tailscale_failed")
        assert event["error"] == "exit 1: tailscaled is not running"
        _serves(a, "both")
        missing = httpx.post(f"{a.gateway}/v1/chat/completions", json={"model": "x", **CHAT})
        assert missing.status_code == 404
        assert len(a.ld.events("gateway.tailscale_failed")) == 1
        assert a.ld.stop() == 0
    finally:
        a.ld.close()


async def test_a_missing_tailscale_is_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No `tailscale` command: the configured peers still come, and one event says why,
    however often the tailnet is read again."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(fleet_hosts, "TAILSCALE_EVERY_S", 0.0)
    peer = Peer("b", "http://127.0.0.1:1")
    hosts = FleetHosts(lambda: Fleet(tailscale_tag="tag:llamad"), lambda: {"b": peer}, lambda: None)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            assert await hosts.current() == {"b": peer}
    failed = [e for e in logs if e["event"] == "gateway.tailscale_failed"]
    assert len(failed) == 1
    assert "not on PATH" in failed[0]["error"]


async def test_an_mdns_browser_that_cannot_start_is_logged_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Browsing on an address this machine lacks fails (ENODEV): the configured peers
    still come, the failure is logged once however often it is tried again."""
    monkeypatch.setattr(fleet_hosts, "BROWSE_RETRY_S", 0.0)
    absent = "198.51.100.77"  # TEST-NET-2: documentation only
    if absent in local_addresses():
        pytest.skip(f"this machine has {absent}")
    peer = Peer("b", "http://127.0.0.1:1")
    fleet = Fleet(discover=True, mdns_interface=absent)
    hosts = FleetHosts(lambda: fleet, lambda: {"b": peer}, lambda: None)
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            assert await hosts.current() == {"b": peer}
    assert [e["event"] for e in logs if e["event"].startswith("discovery.")] == [
        "discovery.browse_failed"
    ]
    await hosts.close()


def _multicast() -> None:
    why = loopback_multicast_works()
    if why:
        pytest.skip(why)


def test_mdns_peers_with_discover_on_and_not_once_it_is_off(tiny_model: Path, b: Host) -> None:
    """`[fleet] discover = true`: A reaches B's model, found by mDNS on loopback, under
    B's advertised name, and never itself (A advertises too). Reloaded with discover
    off, B's models go, and a request for one is a 404."""
    _multicast()
    b.ld.wait_event("discovery.advertising")
    a_ctl = free_port()
    remote = {
        "listen": f"127.0.0.1:{a_ctl}",
        "token_file": write_token(b.dir / "a-admin.token", ADMIN),
        "read_token_file": write_token(b.dir / "a-read.token", READ),
        "advertise": True,
    }
    fleet = {"discover": True, "mdns_interface": "127.0.0.1", **_keys(b.dir)}
    a = start_a(tiny_model, fleet, **{"daemon.remote": remote})
    try:
        a.ld.wait_event("discovery.advertising")
        a.ld.wait_event("discovery.browsing", interface="127.0.0.1")
        wait_for(lambda: "bonly" in a.models(), 20, "A finding B over mDNS")
        b_name = f"{socket.gethostname().split('.')[0]}:{b.control_port}"
        assert a.models()["bonly"]["owned_by"] == f"llamad@{b_name}"
        assert a.models()["both"]["owned_by"] == "llamad"
        _serves(a, "bonly")
        hosts = {e.get("peer") for e in a.ld.events() if e["event"].startswith("gateway.peer_")}
        assert not {h for h in hosts if h and h.endswith(f":{a_ctl}")}, "A asked itself"

        config = a.ld.config
        config.write_text(config.read_text().replace("discover = true", "discover = false"))
        assert a.ld.ctl("reload").returncode == 0
        wait_for(lambda: "bonly" not in a.models(), 20, "B's models gone with discover off")
        missing = httpx.post(f"{a.gateway}/v1/chat/completions", json={"model": "bonly", **CHAT})
        assert missing.status_code == 404
        assert a.ld.stop() == 0
    finally:
        a.ld.close()


async def test_discovered_hosts_never_this_daemon_and_found_twice_once(b: Host) -> None:
    """Against a real B: the browser finds it, not when B is this daemon's own remote;
    a host reached twice keeps the configured name; a status document of our own
    contributes nothing; a peer offline in Tailscale is away without being asked."""
    _multicast()
    b.ld.wait_event("discovery.advertising")
    keys = _keys(b.dir)
    fleet = Fleet(token_file=keys["token_file"], discover=True, mdns_interface="127.0.0.1")
    configured: dict[str, Peer] = {}
    own: list[Remote | None] = [None]
    hosts = FleetHosts(lambda: fleet, lambda: configured, lambda: own[0])
    try:
        found = await _found(hosts)
        [(name, peer)] = found.items()
        assert name == f"{socket.gethostname().split('.')[0]}:{b.control_port}"
        assert (peer.url, peer.source, peer.token_file) == (b.control, "mdns", keys["token_file"])

        own[0] = Remote("127.0.0.1", b.control_port, ADMIN)
        assert await hosts.current() == {}  # B's own advertisement: not a peer of B's

        own[0] = None
        configured["b"] = fleet.with_defaults(Peer("b", b.control))
        both = await hosts.current()
        assert both == {"b": configured["b"]}  # the same URL: the configured peer wins
        both["b-again"] = peer  # as if found at another address
        models = FleetModels(_returning(both), _nothing_local)
        await models.refresh()
        assert {(e.peer.name, m.name) for e, m in models.models()} == {
            ("b", "bonly"),
            ("b", "both"),
        }

        status = await get_json(b.control, "/v1/status", keys["token_file"], None, 5)
        itself = FleetModels(_returning(both), _nothing_local, me=identity(status))
        await itself.refresh()
        assert itself.models() == []

        # Offline in Tailscale: not asked, its models kept as away (a 503 naming it).
        both.clear()
        both["b"] = dataclasses.replace(configured["b"], error="offline in Tailscale")
        await models.refresh()
        assert models.models() == []
        away = await models.pick("bonly")
        assert isinstance(away, list)
        assert [(e.peer.name, e.error) for e in away] == [("b", "offline in Tailscale")]
    finally:
        await hosts.close()


def _nothing_local(_name: str) -> bool:
    return False


def _returning(peers: dict[str, Peer]) -> Callable[[], Awaitable[dict[str, Peer]]]:
    async def current() -> dict[str, Peer]:
        return peers

    return current


async def _found(hosts: FleetHosts, timeout: float = 10.0) -> dict[str, Peer]:
    """The first non-empty `hosts.current()`, within `timeout` seconds."""
    began = time.monotonic()
    while not (found := await hosts.current()):
        assert time.monotonic() - began < timeout, "the browser never found B"
        await asyncio.sleep(0.05)
    return found
