"""llamactl's exit codes: LSB's, by command kind, as supervisorctl uses them.

A status command (`status`, `fleet status`, `service status`) answers with LSB's status
codes: 0 running, 3 not running, 4 status unknown (llamad cannot be reached). An action
(`start`, `stop`, `restart`, `reload`, `logs`, `service install` ...) answers with LSB's
init-script codes: 0 done, 1 failed, 2 bad usage or invalid config, 7 llamad not running.
An instance name llamad does not know is 6 for both kinds (LSB: "not configured").
"""

from __future__ import annotations

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable

    from llamad.client.http import APIError

OK = 0
FAILED = 1
USAGE = 2
NOT_RUNNING = 3  # status: some selected instance is not running
UNKNOWN = 4  # status: llamad (or, for fleet status, some host) could not be asked
UNKNOWN_INSTANCE = 6
DAEMON_NOT_RUNNING = 7  # action: llamad cannot be reached

STATUS, ACTION = "status", "action"

EPILOG = (
    "exit codes (LSB, as supervisorctl): status commands 0 all running, 3 some instance "
    "not running, 4 llamad unreachable (fleet status: some host); actions 0 done, 1 failed "
    "or timed out, 7 llamad not running; any command: 2 bad usage or invalid config, "
    "6 no instance of that name"
)


def unreachable(kind: str) -> int:
    """The code when llamad does not answer: status unknown, or (for an action) not running."""
    return UNKNOWN if kind == STATUS else DAEMON_NOT_RUNNING


def for_api_error(exc: APIError) -> int:
    """An error llamad answered with: its own code for an unknown instance, else failed."""
    return UNKNOWN_INSTANCE if exc.code == "unknown_instance" else FAILED


def worst(codes: Iterable[int]) -> int:
    """One code for several instances: a failure outranks an unknown name, which outranks ok."""
    codes = set(codes)
    for code in (FAILED, UNKNOWN_INSTANCE):
        if code in codes:
            return code
    return OK
