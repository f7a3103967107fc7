"""A Mac that stays up for its clients: no idle sleep while the gateway has work.

A Mac idle-sleeps after some minutes without a local user, whatever its network
clients are waiting for: a long generation stops mid-answer. While the gateway has
requests in flight, or waiting for a model to load, llamad runs macOS's own
`caffeinate -i -w <llamad's pid>`, which holds the power assertion that prevents idle
sleep until it is terminated or llamad exits (`-w`: even a SIGKILLed llamad leaves no
assertion behind). It is released once the gateway has been idle for `LINGER_S`, so a
burst of short requests starts it once. `[daemon] keep_awake = false` turns it off;
where there is no `caffeinate` (Linux) nothing happens.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import time
from collections.abc import Callable
from typing import Any

import structlog

from llamad.common.retrying import rest

log = structlog.get_logger("llamad.daemon")

TICK_S = 1.0  # an idle sleep comes after minutes: a second late to hold it is early enough
LINGER_S = 30.0  # idle this long before the assertion goes: bursts start it once
STOP_S = 2.0  # caffeinate ends at once on SIGTERM; past this it is killed


class KeepAwake:
    """Holds `caffeinate` while `requests()` is above 0 and `enabled()`; the status
    document's `daemon.keep_awake`. Its `run` task is the only writer."""

    def __init__(
        self,
        requests: Callable[[], int],
        enabled: Callable[[], bool],
        *,
        which: Callable[[str], str | None] = shutil.which,
        linger: float = LINGER_S,
        tick: float = TICK_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.requests, self.enabled, self.which = requests, enabled, which
        self.linger, self.tick, self.clock = linger, tick, clock
        self.proc: asyncio.subprocess.Process | None = None
        self.held_since: float | None = None
        self.last_busy = 0.0
        self.error: str | None = None

    def status(self) -> dict[str, Any]:
        held = self.proc is not None and self.proc.returncode is None
        return {
            "enabled": self.enabled(),
            "available": self.which("caffeinate") is not None,
            "held": held,
            "pid": self.proc.pid if held and self.proc is not None else None,
            "held_s": None if self.held_since is None else round(self.clock() - self.held_since),
            "error": self.error,
        }

    async def run(self, stop: asyncio.Event) -> None:
        """Follow the gateway's requests until `stop` is set; the assertion goes with it."""
        try:
            while True:
                await self.step()
                if await rest(self.tick, stop):
                    return
        finally:
            await self.release()

    async def step(self) -> None:
        """Hold the assertion when there is work, release it after `linger` without."""
        now, on = self.clock(), self.enabled()
        if on and self.requests() > 0:
            self.last_busy = now
            if self.proc is None:
                await self.hold()
            elif self.proc.returncode is not None and self.error is None:
                # Not started again until this busy spell ends: a caffeinate that cannot
                # hold (another tool of that name) would be run every second otherwise.
                self.error = f"caffeinate exited with code {self.proc.returncode}"
                log.error("keep_awake.failed", command="caffeinate", error=self.error)
        elif self.proc is not None and (not on or now - self.last_busy >= self.linger):
            await self.release()

    async def hold(self) -> None:
        path = self.which("caffeinate")
        if path is None:
            return
        argv = [path, "-i", "-w", str(os.getpid())]
        try:
            self.proc = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL,
                stderr=asyncio.subprocess.DEVNULL,
            )
        except OSError as exc:
            if self.error is None:  # once, not every second while busy
                log.error("keep_awake.failed", command=path, error=str(exc))
            self.error = str(exc)
            return
        self.error, self.held_since = None, self.clock()
        log.info("keep_awake.held", pid=self.proc.pid, requests=self.requests())

    async def release(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        held = None if self.held_since is None else round(self.clock() - self.held_since, 1)
        self.held_since = None
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                proc.terminate()
            try:
                await asyncio.wait_for(proc.wait(), STOP_S)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    proc.kill()
                await proc.wait()
        log.info("keep_awake.released", held_s=held)
