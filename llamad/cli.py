"""llamactl: talk to a running llamad over its control socket.

Exit codes follow supervisorctl: 0 all good, 1 a command failed, 2 bad usage or an invalid
config, 3 some selected instance is not running, 4 llamad cannot be reached. Only the
standard library is imported on the way to `status`, which has to feel instant.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
from pathlib import Path
from urllib.parse import quote

from llamad import __version__, paths
from llamad.client import APIError, BadConfig, Client, ClientError, Unreachable, find_socket

# typing costs llamactl ~3 ms to import, and annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

POLL_S = 0.05
VERBS = {
    "start": "start instances and wait until they are running",
    "stop": "stop instances and wait until they have stopped",
    "restart": "restart instances and wait until a new process runs",
}
SOCKET_HELP = "control socket (default: $LLAMAD_SOCKET, else the config's, else the default)"
CONFIG_HELP = "llamad.toml (default: $LLAMAD_CONFIG or ~/.config/llamad/llamad.toml)"
DESCRIPTION = "Control a running llamad: status, start and stop, reload, logs."
EPILOG = "exit codes: 0 ok, 1 failed, 2 usage/invalid config, 3 not running, 4 no llamad"
# A start that finds the instance failed may be looked at before llamad has acted on it.
FAILED_GRACE_S = 1.0


def _err(message: str) -> None:
    print(f"llamactl: {message}", file=sys.stderr)


def _client(args: argparse.Namespace, timeout: float = 10.0) -> Client:
    return Client(find_socket(args.socket, args.config), timeout=timeout)


def _status(args: argparse.Namespace) -> int:
    doc = _client(args).call("GET", "/v1/status")
    instances = doc.get("instances") or []
    if args.names:
        known = {inst.get("name") for inst in instances}
        missing = [name for name in args.names if name not in known]
        for name in missing:
            _err(f"no instance named {name!r}")
        if missing:
            return 1
        doc = {**doc, "instances": [i for i in instances if i.get("name") in args.names]}
    if args.json:
        print(json.dumps(doc, indent=2))
    else:
        from llamad import table

        print(table.render(doc, colour=table.use_colour(sys.stdout)))
    return 0 if all(i.get("state") == "running" for i in doc["instances"]) else 3


def _control(args: argparse.Namespace) -> int:
    verb, client = args.command, _client(args)
    names = list(args.names)
    if args.all:
        names = [i["name"] for i in client.call("GET", "/v1/status").get("instances") or []]
    elif not names:
        _err(f"{verb}: name at least one instance, or use --all")
        return 2
    ok, pending, old_pids = True, {}, {}
    for name in dict.fromkeys(names):
        path = f"/v1/instances/{quote(name, safe='')}"
        try:
            if verb == "restart":
                old_pids[name] = client.call("GET", path).get("pid")
            doc = client.call("POST", f"{path}/{verb}")
        except APIError as exc:
            print(f"{name}: {exc.message}")
            ok = False
            continue
        if args.no_wait:
            print(f"{name}: {verb} requested (now {doc.get('state')})")
        else:
            pending[name] = (path, doc)
    from llamad import table

    started, seen_other = time.monotonic(), set()
    while pending:
        for name, (_, doc) in list(pending.items()):
            if doc.get("state") != "failed":
                seen_other.add(name)
            final = name in seen_other or time.monotonic() - started > FAILED_GRACE_S
            result = table.outcome(verb, doc, old_pids.get(name), final)
            if result:
                print(result[1], flush=True)
                ok = ok and result[0]
                del pending[name]
        if pending and time.monotonic() - started >= args.timeout:
            for _, doc in pending.values():
                print(table.timed_out(doc))
            return 1
        if pending:
            time.sleep(POLL_S)
            pending = {n: (p, client.call("GET", p)) for n, (p, _) in pending.items()}
    return 0 if ok else 1


def _reload(args: argparse.Namespace) -> int:
    try:
        report = _client(args, timeout=120.0).call("POST", "/v1/reload")
    except APIError as exc:
        if exc.status != 422:
            raise
        print(exc.message, file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        from llamad.table import reload_lines

        print("\n".join(reload_lines(report)))
    return 0


def _logs(args: argparse.Namespace) -> int:
    query = f"lines={args.lines}&follow={int(args.follow)}"
    path = f"/v1/instances/{quote(args.name, safe='')}/logs?{query}"
    out = sys.stdout.buffer
    try:
        # No read timeout while following: a quiet log is not a dead daemon.
        with _client(args).stream(path, timeout=None if args.follow else 10.0) as chunks:
            for chunk in chunks:
                out.write(chunk)
                out.flush()
    except KeyboardInterrupt:
        return 0  # Ctrl-C is how one stops following
    return 0


def _validate(args: argparse.Namespace) -> int:
    path = Path(args.config).expanduser() if args.config else paths.default_config()
    if not path.is_file():
        _err(f"{path}: no such file")
        return 2
    from llamad.spec import check  # pydantic and friends: paid for by this command only

    problems = check(path)
    for line in problems:
        print(line, file=sys.stderr)
    if problems:
        return 2
    print(f"{path}: ok")
    return 0


def _version(args: argparse.Namespace) -> int:
    print(f"llamactl {__version__}")
    try:
        daemon = _client(args, timeout=2.0).call("GET", "/v1/status").get("daemon") or {}
    except ClientError:
        return 0  # the daemon is optional here
    server = str(daemon.get("llama_server_version") or "unknown").removeprefix("version: ")
    print(f"llamad {daemon.get('version')} (pid {daemon.get('pid')}), llama-server {server}")
    return 0


def build_parser(service: bool) -> argparse.ArgumentParser:
    """The llamactl parser; `service` pulls in llamad.service's sub-commands (may raise)."""
    parser = argparse.ArgumentParser(prog="llamactl", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--socket", metavar="PATH", help=SOCKET_HELP)
    parser.add_argument("--config", metavar="FILE", help=CONFIG_HELP)
    parser.add_argument("--version", action="store_true", help="print versions and exit")
    parser.set_defaults(names=[], json=False, func=_status)
    # Also accepted after the command. SUPPRESS keeps a sub-parser from resetting a value
    # given before it; these must be actions of their own, as parents share action objects.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--socket", metavar="PATH", default=argparse.SUPPRESS, help=SOCKET_HELP)
    common.add_argument("--config", metavar="FILE", default=argparse.SUPPRESS, help=CONFIG_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", help="(default: status)")

    def add(name: str, func: Any, text: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, parents=[common], help=text, description=text)
        p.set_defaults(func=func)
        return p

    p = add("status", _status, "show instances; exit 3 if a selected one is not running")
    p.add_argument("names", nargs="*", metavar="NAME", help="only these instances")
    p.add_argument("--json", action="store_true", help="print llamad's status document")
    for verb, text in VERBS.items():
        p = add(verb, _control, text)
        p.add_argument("names", nargs="*", metavar="NAME")
        p.add_argument("--all", action="store_true", help="every configured instance")
        p.add_argument("--no-wait", action="store_true", help="return once llamad has the command")
        p.add_argument("--timeout", type=float, default=60.0, metavar="S", help="wait at most S s")
    p = add("reload", _reload, "re-read the config file and apply what changed")
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p = add("logs", _logs, "print an instance's log (llama-server's output)")
    p.add_argument("name", metavar="NAME")
    p.add_argument("-n", "--lines", type=int, default=100, metavar="N", help="last N lines (100)")
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new lines")
    add("validate", _validate, "check a config file; needs no running llamad")
    add("version", _version, "print llamactl's version, and llamad's if it is running")
    if service:
        # import_module consults sys.modules, so a stand-in registered there is honoured.
        service_module = importlib.import_module("llamad.service")

        service_module.register(sub)
    else:
        # A placeholder keeps other commands from importing the service code; run() swaps it.
        sub.add_parser("service", add_help=False, help="run llamad under launchd or systemd")
    return parser


def run(argv: list[str] | None = None) -> int:
    """Parse `argv` (default sys.argv[1:]), run the command, return the exit code."""
    argv = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser(service=False)
        args, extra = parser.parse_known_args(argv)
        if args.command == "service":
            try:
                parser = build_parser(service=True)
            except ImportError as exc:
                _err(f"service commands unavailable: {exc}")
                return 1
            args, extra = parser.parse_known_args(argv)
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help, or a usage error already printed by argparse
        return exc.code if isinstance(exc.code, int) else 2
    if args.version:
        args.func = _version
    try:
        return int(args.func(args) or 0)
    except Unreachable as exc:
        _err(str(exc))
        return 4
    except BadConfig as exc:
        _err(str(exc))
        return 2
    except ClientError as exc:
        _err(str(exc))
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader (head, less) left; aim stdout at /dev/null so the exit flush is quiet.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


def main(argv: list[str] | None = None) -> int:
    """Console-script entry point (`llamactl`); setuptools wraps it in sys.exit()."""
    return run(argv)


if __name__ == "__main__":
    sys.exit(main())
