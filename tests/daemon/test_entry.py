"""`llamad --help` and `--version` answer without importing the daemon."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from llamad import __version__

HEAVY = ("llamad.daemon.main", "structlog", "pydantic", "httpx", "psutil")


def probe(flag: str) -> tuple[str, list[str]]:
    """Run the `llamad` entry point with `flag` in a fresh interpreter: what it printed,
    and which of HEAVY it had imported by the time it exited."""
    code = (
        "import sys, json\n"
        "from llamad.daemon.entry import main\n"
        f"try:\n    main([{flag!r}])\n"
        "except SystemExit:\n    pass\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    *printed, imported = run.stdout.splitlines()
    return "\n".join(printed), json.loads(imported)


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_import_nothing_of_the_daemon(flag: str) -> None:
    printed, imported = probe(flag)
    assert imported == []
    assert (
        ("usage: llamad" in printed) if flag == "--help" else (printed == f"llamad {__version__}")
    )
