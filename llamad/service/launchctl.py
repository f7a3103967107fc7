"""The launchctl calls a reinstall and a restart need, with the waits and retries launchd
asks for.

`bootout` returns before the job is gone (and answers 36, "Operation now in progress",
while an earlier one is still under way); a `bootstrap` right after it answers 5
("Input/output error") until launchd has let go. So, as Homebrew's `brew services` does:
retry bootout on 36, wait until `print` no longer finds the job, and retry bootstrap on 5,
each for a few seconds.

A stop is SIGTERM and a wait for the job's process to exit: llamad then saves its slots
and ends its streams. launchd itself sends SIGKILL `ExitTimeOut` seconds after SIGTERM,
so the wait is bounded by that (the plist's value) and a little slack.
"""

from __future__ import annotations

import os
import subprocess
import time

from llamad.service.common import ServiceError, failure, run_tool

IN_PROGRESS = 36  # bootout: EINPROGRESS
IO_ERROR = 5  # bootstrap: EIO, the old job not yet gone
GONE = (3, 113)  # "No such process" / "Could not find specified service"
RETRY_FOR_S = 5.0
RETRY_EVERY_S = 0.25
# What launchd waits between SIGTERM and SIGKILL when a plist sets no ExitTimeOut.
LAUNCHD_EXIT_TIMEOUT = 20
# After launchd's SIGKILL, the time for the process to be reaped and the job to update.
KILL_SLACK_S = 5.0


def loaded_in(domains: tuple[str, ...], label: str) -> tuple[str, str] | None:
    """(domain, `launchctl print` output) for the first domain that has the job loaded."""
    for domain in domains:
        result = run_tool(["launchctl", "print", f"{domain}/{label}"], check=False)
        if result.returncode == 0:
            return domain, result.stdout
    return None


def running_pid(printed: str) -> int | None:
    """The job's pid from `launchctl print` output, when it is running."""
    fields = parse_print(printed)
    pid = fields.get("pid", "")
    return int(pid) if pid.isdigit() and fields.get("state") == "running" else None


def stop(domain: str, label: str, pid: int, exit_timeout: float) -> None:
    """SIGTERM the job's process `pid` and return once it has exited; the job stays
    loaded. `exit_timeout` is the plist's ExitTimeOut."""
    target = f"{domain}/{label}"
    result = run_tool(["launchctl", "kill", "SIGTERM", target], check=False)
    if result.returncode not in (0, *GONE):
        raise failure(result)
    deadline = time.monotonic() + exit_timeout + KILL_SLACK_S
    while True:
        now = loaded_in((domain,), label)
        if (now is None or running_pid(now[1]) != pid) and not _alive(pid):
            return
        if time.monotonic() > deadline:
            late = f"{target} (pid {pid}) still runs {exit_timeout:.0f} s after SIGTERM"
            raise ServiceError(late)
        time.sleep(RETRY_EVERY_S)


def bootout(
    domain: str, label: str, pid: int | None = None, exit_timeout: float = LAUNCHD_EXIT_TIMEOUT
) -> None:
    """Boot the job out of `domain` and return once launchd no longer has it and its
    process (`pid`, when it ran) has exited: a graceful stop may take up to
    `exit_timeout` (the plist's ExitTimeOut)."""
    target = f"{domain}/{label}"
    result = _retrying(["launchctl", "bootout", target], IN_PROGRESS)
    if result.returncode not in (0, *GONE):
        raise failure(result)
    deadline = time.monotonic() + max(RETRY_FOR_S, exit_timeout + KILL_SLACK_S)
    while loaded_in((domain,), label) is not None or (pid is not None and _alive(pid)):
        if time.monotonic() > deadline:
            raise ServiceError(f"{target} is still loaded {exit_timeout:.0f} s after bootout")
        time.sleep(RETRY_EVERY_S)


def bootstrap(domain: str, label: str, plist: str) -> subprocess.CompletedProcess[str] | None:
    """`enable` then `bootstrap` (a disabled job won't bootstrap); the first failed call,
    or None once loaded."""
    enabled = run_tool(["launchctl", "enable", f"{domain}/{label}"], check=False)
    if enabled.returncode != 0:
        return enabled
    result = _retrying(["launchctl", "bootstrap", domain, plist], IO_ERROR)
    return result if result.returncode != 0 else None


def parse_print(text: str) -> dict[str, str]:
    """The top-level `key = value` lines of `launchctl print`; nested blocks are skipped."""
    fields: dict[str, str] = {}
    depth = 0
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith("{"):
            depth += 1
        elif line.startswith("}"):
            depth -= 1
        elif depth == 1 and " = " in line:
            key, _, value = line.partition(" = ")
            fields.setdefault(key, value)
    return fields


def _alive(pid: int) -> bool:
    # launchd's job, not our child: once it has exited, launchd has reaped it.
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # a system daemon's process, run as another user
        return True
    return True


def _retrying(argv: list[str], transient: int) -> subprocess.CompletedProcess[str]:
    deadline = time.monotonic() + RETRY_FOR_S
    result = run_tool(argv, check=False)
    while result.returncode == transient and time.monotonic() < deadline:
        time.sleep(RETRY_EVERY_S)
        result = run_tool(argv, check=False)
    return result
