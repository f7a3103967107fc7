"""The launchctl calls a reinstall needs, with the waits and retries launchd asks for.

`bootout` returns before the job is gone (and answers 36, "Operation now in progress",
while an earlier one is still under way); a `bootstrap` right after it answers 5
("Input/output error") until launchd has let go. So, as Homebrew's `brew services` does:
retry bootout on 36, wait until `print` no longer finds the job, and retry bootstrap on 5,
each for a few seconds.
"""

from __future__ import annotations

import subprocess
import time

from llamad.service.common import ServiceError, failure, run_tool

IN_PROGRESS = 36  # bootout: EINPROGRESS
IO_ERROR = 5  # bootstrap: EIO, the old job not yet gone
GONE = (3, 113)  # "No such process" / "Could not find specified service"
RETRY_FOR_S = 5.0
RETRY_EVERY_S = 0.25


def loaded_in(domains: tuple[str, ...], label: str) -> tuple[str, str] | None:
    """(domain, `launchctl print` output) for the first domain that has the job loaded."""
    for domain in domains:
        result = run_tool(["launchctl", "print", f"{domain}/{label}"], check=False)
        if result.returncode == 0:
            return domain, result.stdout
    return None


def bootout(domain: str, label: str) -> None:
    """Boot the job out of `domain` and return once launchd no longer has it."""
    target = f"{domain}/{label}"
    result = _retrying(["launchctl", "bootout", target], IN_PROGRESS)
    if result.returncode not in (0, *GONE):
        raise failure(result)
    deadline = time.monotonic() + RETRY_FOR_S
    while loaded_in((domain,), label) is not None:
        if time.monotonic() > deadline:
            raise ServiceError(f"{target} is still loaded {RETRY_FOR_S:.0f} s after bootout")
        time.sleep(RETRY_EVERY_S)


def bootstrap(domain: str, label: str, plist: str) -> subprocess.CompletedProcess[str] | None:
    """`enable` then `bootstrap` (a disabled job won't bootstrap); the first failed call,
    or None once loaded."""
    enabled = run_tool(["launchctl", "enable", f"{domain}/{label}"], check=False)
    if enabled.returncode != 0:
        return enabled
    result = _retrying(["launchctl", "bootstrap", domain, plist], IO_ERROR)
    return result if result.returncode != 0 else None


def _retrying(argv: list[str], transient: int) -> subprocess.CompletedProcess[str]:
    deadline = time.monotonic() + RETRY_FOR_S
    result = run_tool(argv, check=False)
    while result.returncode == transient and time.monotonic() < deadline:
        time.sleep(RETRY_EVERY_S)
        result = run_tool(argv, check=False)
    return result
