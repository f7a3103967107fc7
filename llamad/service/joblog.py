"""Why a launchd job is not serving, read from the end of its stderr log.

llamad reports a bad config as `llamad: ...` lines on stderr, which launchd writes to the
job's `StandardErrorPath`, ending with the `llamactl validate` line and, under launchd,
the `WAITING` line while it waits for the file to change (`llamad/daemon/config_wait.py`).
A daemon that serves logs JSON lines after them, so only a report at the very end counts.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from llamad.common.service_job import VALIDATE, WAITING

PREFIX = "llamad: "
TAIL_BYTES = 64 * 1024


@dataclass(frozen=True)
class ConfigProblem:
    """The last problem llamad reported, and whether it is still waiting for a fix."""

    line: str
    waiting: bool


def config_problem(err_log: Path) -> ConfigProblem | None:
    """The bad-config report at the end of `err_log`, if that is where the log ends."""
    try:
        with err_log.open("rb") as fh:
            fh.seek(max(0, fh.seek(0, 2) - TAIL_BYTES))
            tail = fh.read().decode("utf-8", "replace")
    except OSError:
        return None
    block: list[str] = []
    for line in reversed([ln for ln in tail.splitlines() if ln.strip()]):
        if not line.startswith(PREFIX):
            break
        block.append(line.removeprefix(PREFIX))
    if not block:
        return None
    # Newest first: the report's closing lines, then its problems back to an older report.
    ends = [WAITING in ln or VALIDATE in ln for ln in block]
    closing = ends.index(False) if False in ends else len(block)
    problems = block[closing:]
    if closing == 0 or not problems:
        return None
    latest = problems[: ends[closing:].index(True)] if True in ends[closing:] else problems
    return ConfigProblem(latest[-1], WAITING in block[0])
