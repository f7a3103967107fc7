"""`launchd/dev.llamad.daemon.plist`, the example the docs show: what `llamactl service
install` writes for a user `you` with a virtualenv in `~/llamad`, rendered by the same code.

Regenerate it with `.venv/bin/python -m llamad.service.launchd_example >
launchd/dev.llamad.daemon.plist`; a test fails when it differs from what install writes.
"""

from __future__ import annotations

import sys
from pathlib import Path

from llamad.service.common import DEFAULT_STOP_TIMEOUT, STOP_MARGIN, InstallOptions
from llamad.service.launchd import render

HOME = Path("/Users/you")
EXAMPLE = InstallOptions(
    label=None,
    system=False,
    home=HOME,
    config=HOME / ".config" / "llamad" / "llamad.toml",
    llamad=HOME / "llamad" / ".venv" / "bin" / "llamad",
    stop_budget=DEFAULT_STOP_TIMEOUT + STOP_MARGIN,
)


def example() -> str:
    """The example plist's text."""
    return render(EXAMPLE)


if __name__ == "__main__":
    sys.stdout.write(example())
