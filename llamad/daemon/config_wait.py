"""A bad config under launchd: wait for the file to change instead of exiting into a loop.

launchd has no `RestartPreventExitStatus`: with `KeepAlive = {SuccessfulExit = false}`
every non-zero exit is restarted, `ThrottleInterval` (10 s) apart, forever, and an exit 0
would look like a stop asked for. So a daemon that launchd started (the plist sets
`LLAMAD_SERVICE=launchd`) and whose config is bad stays up, idle, until the file changes,
five minutes pass or it is asked to stop. It then exits 2 (launchd starts it again, and
it reads the file again) or 0 (the stop stays a stop). Nothing is served meanwhile;
`llamactl service status` finds the `WAITING` line in the job's log
(`llamad/service/joblog.py`) and shows the problem.
"""

from __future__ import annotations

import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from llamad.common.fileid import file_id
from llamad.common.service_job import WAITING

# A config saved by an editor is seen within this; the wait costs nothing else.
POLL_S = 1.0
# What a changed config cannot show (a llama-server installed, a quarantine flag cleared,
# a volume mounted) is tried again this often: one report per try, not one per 10 s.
RETRY_S = 300.0


def wait_for_fix(path: Path, poll_s: float = POLL_S, retry_s: float = RETRY_S) -> bool:
    """Block until `path` changes or `retry_s` has passed (True; SIGHUP counts as a change),
    or SIGTERM/SIGINT (False)."""
    again = f"save it again to retry at once, else it retries in {retry_s:.0f} s"
    print(f"llamad: {path}: {WAITING}: {again}", file=sys.stderr, flush=True)
    woke, changed = threading.Event(), threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if signum == signal.SIGHUP:
            changed.set()
        woke.set()

    wanted = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
    previous = {signum: signal.signal(signum, on_signal) for signum in wanted}
    try:
        seen, deadline = file_id(path), time.monotonic() + retry_s
        while not woke.wait(poll_s):
            if file_id(path) != seen or time.monotonic() >= deadline:
                return True
        return changed.is_set()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
