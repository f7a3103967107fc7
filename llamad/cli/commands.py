"""What each llamactl command does, against the local daemon or (--host) a peer.

Only the standard library is imported on the way to `status`; see `cli.py`.
"""

from __future__ import annotations

import json
import socket
import sys
from pathlib import Path
from urllib.parse import quote

from llamad import __version__
from llamad.cli import exits
from llamad.client.http import APIError, AuthError, Client, ClientError, find_socket
from llamad.common import paths

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from types import ModuleType
    from typing import Any

# The request may take as long as llamad's wait, plus this for the answer to arrive.
SLACK_S = 10.0


def err(message: str) -> None:
    """Print `llamactl: message` on stderr."""
    print(f"llamactl: {message}", file=sys.stderr)


def client_for(args: argparse.Namespace, timeout: float = 10.0) -> Client:
    """The local daemon through its socket, or with --host NAME a peer over HTTP(S)."""
    if not args.host:
        return Client(find_socket(args.socket, args.config), timeout=timeout)
    from dataclasses import replace

    from llamad.fleet.peers import find_peer, load_fleet  # only for --host: keep `status` lean

    fleet = load_fleet(args.config)
    peer = find_peer(args.host, fleet)
    if args.token_file:  # the command line wins over the config, for this one host
        peer = replace(peer, token_file=Path(args.token_file).expanduser())
    elif peer.token_file is None:
        peer = replace(peer, token_file=fleet.token_file)
    if args.ca_file:
        peer = replace(peer, ca_file=Path(args.ca_file).expanduser())
    return peer.client(timeout)


def status(args: argparse.Namespace) -> int:
    """`llamactl status [NAME...]`: the table (or --json); 3 if one is not running."""
    doc = client_for(args).call("GET", "/v1/status")
    instances = doc.get("instances") or []
    if args.names:
        known = {inst.get("name") for inst in instances}
        missing = [name for name in args.names if name not in known]
        for name in missing:
            err(f"no instance named {name!r}")
        if missing:
            return exits.UNKNOWN_INSTANCE
        doc = {**doc, "instances": [i for i in instances if i.get("name") in args.names]}
    from llamad.cli import table

    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        print(table.render(doc, colour=table.use_colour(sys.stdout)))
    return exits.OK if all(table.fine(i) for i in doc["instances"]) else exits.NOT_RUNNING


def control(args: argparse.Namespace) -> int:
    """`start`, `stop` and `restart`: llamad holds each request until the outcome is known."""
    # load/unload are start/stop under the gateway's names for them.
    verb = {"load": "start", "unload": "stop"}.get(args.command, args.command)
    client = client_for(args, timeout=args.timeout + SLACK_S)
    names = list(args.names)
    if args.all:
        names = [i["name"] for i in client.call("GET", "/v1/status").get("instances") or []]
    elif not names:
        err(f"{verb}: name at least one instance, or use --all")
        return exits.USAGE
    from concurrent.futures import ThreadPoolExecutor  # one request per name, in parallel

    query = "" if args.no_wait else f"?wait={args.timeout:g}"
    with ThreadPoolExecutor(max_workers=min(len(names), 16)) as pool:
        docs = list(pool.map(lambda n: _command(client, verb, n, query), dict.fromkeys(names)))
    codes = [_report(verb, doc, args.no_wait) for doc in docs]
    return exits.worst(codes)


def _command(client: Client, verb: str, name: str, query: str) -> dict[str, Any] | APIError:
    try:
        return client.call("POST", f"/v1/instances/{quote(name, safe='')}/{verb}{query}")
    except AuthError:
        raise  # the host refused us, not this instance: say it once
    except APIError as exc:
        return exc


def _report(verb: str, doc: dict[str, Any] | APIError, no_wait: bool) -> int:
    """Print one instance's line; its exit code."""
    if isinstance(doc, APIError):
        err(doc.message)
        return exits.for_api_error(doc)
    if no_wait:
        print(f"{doc.get('name')}: {verb} requested (now {doc.get('state')})")
        return exits.OK
    from llamad.cli import outcomes

    result = outcomes.outcome(verb, doc)
    if result is None:
        print(outcomes.timed_out(doc))
        return exits.FAILED
    print(result[1], flush=True)
    return exits.OK if result[0] else exits.FAILED


def reload(args: argparse.Namespace) -> int:
    """`llamactl reload`: what changed; 2 when the daemon finds the file invalid."""
    try:
        report = client_for(args, timeout=120.0).call("POST", "/v1/reload")
    except APIError as exc:
        if exc.status != 422 or isinstance(exc, AuthError):
            raise
        print(exc.message, file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        from llamad.cli.outcomes import reload_lines

        print("\n".join(reload_lines(report)))
    return 0


def logs(args: argparse.Namespace) -> int:
    """`llamactl logs NAME [-n N] [-f]`: an instance's output, optionally followed."""
    query = f"lines={args.lines}&follow={int(args.follow)}"
    path = f"/v1/instances/{quote(args.name, safe='')}/logs?{query}"
    out = sys.stdout.buffer
    try:
        # No read timeout while following: a quiet log is not a dead daemon.
        with client_for(args).stream(path, timeout=None if args.follow else 10.0) as chunks:
            for chunk in chunks:
                out.write(chunk)
                out.flush()
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how one stops following
    return 0


def validate(args: argparse.Namespace) -> int:
    """`llamactl validate`: the daemon's own checks on a config file, no daemon needed."""
    path = Path(args.config).expanduser() if args.config else paths.default_config()
    if not path.is_file():
        err(f"{path}: no such file")
        return 2
    from llamad.config.load import check  # pydantic and friends: paid for by this command only

    warnings: list[str] = []
    problems = check(path, warnings)
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        return 2
    for line in warnings:
        print(f"warning: {line}", file=sys.stderr)
    print(f"{path}: ok")
    return 0


def version(args: argparse.Namespace) -> int:
    """`llamactl version`: ours, and the daemon's when one answers."""
    print(f"llamactl {__version__}")
    try:
        daemon = client_for(args, timeout=2.0).call("GET", "/v1/status").get("daemon") or {}
    except ClientError:
        return 0  # the daemon is optional here
    server = str(daemon.get("llama_server_version") or "unknown").removeprefix("version: ")
    print(f"llamad {daemon.get('version')} (pid {daemon.get('pid')}), llama-server {server}")
    return 0


def export(args: argparse.Namespace) -> int:
    """`llamactl export kubernetes|litellm`: print what that system needs to reach llamad."""
    from llamad.cli import export as documents  # only for this command

    try:
        if args.target == "kubernetes":
            text = _kubernetes(args, documents)
        else:
            text = _litellm(args, documents)
    except documents.ExportError as exc:
        err(str(exc))
        return exits.USAGE
    print(text, end="")
    return exits.OK


def _kubernetes(args: argparse.Namespace, documents: ModuleType) -> str:
    """The Service and EndpointSlice, from the flags, else from the config's listeners."""
    address, port, control = args.address, args.port, args.control_port
    if address is None or port is None or control is None:
        path = Path(args.config).expanduser() if args.config else paths.default_config()
        from llamad.config.load import ConfigError, load  # pydantic: this command only

        try:
            resolved = load(path)
        except ConfigError as exc:
            raise documents.ExportError(exc.lines[0]) from None
        if resolved.gateway is None and port is None:
            raise documents.ExportError(f"{path}: no [gateway] listen: give --port")
        if port is None and resolved.gateway is not None:
            port = resolved.gateway.port
        if address is None and resolved.gateway is not None:
            address = resolved.gateway.host
        remote = resolved.daemon.remote
        if control is None:
            control = remote.port if remote else 0
    if address is None:
        raise documents.ExportError("no [gateway] listen: give --address")
    ports = {"http": port, **({"control": control} if control else {})}
    name = args.name or documents.service_name(f"llamad-{socket.gethostname().split('.')[0]}")
    return str(documents.kubernetes(name, args.namespace, address, ports))


def _litellm(args: argparse.Namespace, documents: ModuleType) -> str:
    """The model_list, from the running daemon: each model and alias its gateway routes."""
    doc = client_for(args).call("GET", "/v1/status")
    gateway = doc.get("gateway") or {}
    url = args.url
    if url is None:
        listen = str(gateway.get("listen") or "")
        if not listen:
            raise documents.ExportError("llamad runs no gateway ([gateway] listen)")
        host, _, port = listen.rpartition(":")
        if host in ("0.0.0.0", "::", ""):
            host = "127.0.0.1"  # every interface: this machine reaches it on loopback
        url = f"http://{f'[{host}]' if ':' in host else host}:{port}/v1"
    names: list[str] = []
    for inst in doc.get("instances") or []:
        routed = inst.get("gateway") or {}
        if routed.get("routable"):
            names += [inst["name"], *routed.get("aliases", [])]
    return str(documents.litellm(names, url, args.key_env))
