"""llamactl: talk to a running llamad over its control socket, or to peers over HTTP(S).

Exit codes follow LSB by command kind, as supervisorctl's do: see `exits.py`. Only the
standard library is imported on the way to `status`, which has to feel instant.

The parser lives in `cli_parser.py`, the commands in `commands.py` and `fleet.py`.
"""

from __future__ import annotations

import os
import sys

from llamad.cli import exits
from llamad.cli.commands import err, version
from llamad.cli.parser import build_parser
from llamad.client.http import APIError, BadConfig, ClientError, Unreachable

__all__ = ["build_parser", "main", "run"]

LOCAL_ONLY = {
    "validate": "checks a file on this machine",
    "service": "acts on this machine",
    "fleet": "asks every host",
}


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
                err(f"service commands unavailable: {exc}")
                return 1
            args, extra = parser.parse_known_args(argv)
        if extra:
            parser.error(f"unrecognized arguments: {' '.join(extra)}")
    except SystemExit as exc:  # --help, or a usage error already printed by argparse
        return exc.code if isinstance(exc.code, int) else 2
    if args.version:
        args.func = version
    if args.host and args.command in LOCAL_ONLY:
        err(f"{args.command} {LOCAL_ONLY[args.command]}; --host does not apply")
        return 2
    try:
        return int(args.func(args) or 0)
    except Unreachable as exc:
        err(str(exc))
        return exits.unreachable(args.kind)
    except BadConfig as exc:
        err(str(exc))
        return exits.USAGE
    except APIError as exc:
        err(str(exc))
        return exits.for_api_error(exc)
    except ClientError as exc:
        err(str(exc))
        return exits.FAILED
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
