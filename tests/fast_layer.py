"""`make test-fast`: the in-process tests alone (parsers, the door, admission, tables).

The layer is the suite minus what starts a process, with no list to keep: with
`LLAMAD_TESTS=fast`, a test is left out before it runs when it asks for a fixture known to
start one (or is marked `process`), and skipped the moment it starts one anyway (Python's
audit events for every way to start a process). A new in-process test joins the layer by
being one; a new process test is skipped by its first spawn, and marking it `process` (or
using one of SPAWNING's fixtures) only saves the setup that comes before.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import pytest

ON = os.environ.get("LLAMAD_TESTS") == "fast"

# Fixtures whose every definition starts a process (llama-server, a daemon, a build).
SPAWNING = frozenset(
    {
        "llama_server",
        "real_binary",
        "real_help",
        "real_version",
        "real_model",
        "tiny_mlx_model",
        "daemon",
        "gw",
        "gateway",
        "served",
        "pair",
        "remote",
        "sdist",
        "small_disk",
    }
)
SPAWN_EVENTS = frozenset(
    {"subprocess.Popen", "os.posix_spawn", "os.fork", "os.forkpty", "os.system", "os.exec"}
)
REASON = "starts a process: `make test` runs it, `make test-fast` leaves it out"


def leave_out(items: list[pytest.Item], config: pytest.Config) -> None:
    """Deselect the items that ask for a spawning fixture or are marked `process`."""
    kept, dropped = [], []
    for item in items:
        spawns = SPAWNING.intersection(item.fixturenames)
        (dropped if spawns or item.get_closest_marker("process") else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def _refuse_spawns(event: str, _args: tuple[Any, ...]) -> None:
    if event in SPAWN_EVENTS:
        pytest.skip(REASON, allow_module_level=True)  # a spawn at import skips the module


def install(config: pytest.Config) -> None:
    """In the fast layer, make any start of a process skip the test that asked for it.
    A test stopped at its spawn may leave a file its helper opened for the child: what
    leaks there is `make test`'s to judge, where the test runs whole."""
    sys.addaudithook(_refuse_spawns)
    for category in ("ResourceWarning", "pytest.PytestUnraisableExceptionWarning"):
        config.addinivalue_line("filterwarnings", f"ignore::{category}")
