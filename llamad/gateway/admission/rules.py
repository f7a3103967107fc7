"""Admission: every rule about when a model may take a request or be stopped, in one place.

A model's `Slot` counts its requests in flight and waiting, and holds the claims that keep
it from taking more: a stop (an idle stop, an eviction or an unload) and the drains of
reloads and restarts. Every change is a synchronous method, so a decision and its mark
happen in one step of the event loop: no other task can come between them.

The rules:
- A request is admitted only while no stop is claimed and no drain holds the model. The
  slot a request was admitted to is the one it releases, even after a reload dropped the
  model's name and a new slot took it.
- A stop is claimed only when nothing is in flight, waiting or loading. Once claimed, the
  model admits nothing until the stop has ended.
- An unload asked while requests run happens once, when the last of them ends.
- A request's keep_alive holds for the process it was admitted to, as Ollama keeps it for
  one load: once that process is gone, the model's own idle_timeout applies again.
- A model that failed to load is not loaded again (nor anything evicted for it) until its
  backoff has passed: the requests meanwhile get the failure at once.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass


class StopWhy(enum.Enum):
    """Why the gateway stops a model; each one ends the model IDLE."""

    IDLE = "idle"  # its idle timer ran out
    EVICT = "evict"  # another model needs its room
    UNLOAD = "unload"  # a client asked (Ollama's keep_alive 0)


@dataclass(frozen=True)
class StopCause:
    """What a stop was for, as the event, the log and the status document tell it."""

    # memory, max_loaded, exclusive, group; idle_timeout, unload
    cause: str
    for_model: str | None = None  # the model that needed the room
    set_name: str | None = None  # the group or exclusive set that took it along

    def fields(self) -> dict[str, str | None]:
        return {"cause": self.cause, "for_model": self.for_model, "set": self.set_name}


class AdmissionError(Exception):
    """A slot was asked for something its rules forbid: a bug in the caller."""


@dataclass(eq=False)
class Slot:
    """What the gateway tracks for one model. Only the methods below change its fields;
    the loads call those of a load, the ticker sets `measured`."""

    name: str
    in_flight: int = 0
    waiting: int = 0
    drains: int = 0  # drains holding the model now
    drained: int = 0  # drains ever begun: a load that saw one begin was interrupted
    stop: StopWhy | None = None
    cause: StopCause | None = None  # what the claimed stop is for (None: its StopWhy)
    unload_pending: bool = False
    keep_alive: float | None = None  # a request's override of idle_timeout...
    keep_pid: int | None = None  # ...for this process only
    expires: float | None = None  # monotonic time of the idle stop, when armed
    last_used: float = 0.0  # monotonic
    load: asyncio.Task[None] | None = None
    deciding: bool = False  # the load waits for room: cancelled when nobody waits
    measured: int | None = None  # its footprint when last seen running
    failures: int = 0  # loads failed in a row
    refused_until: float = 0.0  # monotonic: no load before this, after a failed one
    refusal: str = ""  # why the last load failed

    @property
    def admits(self) -> bool:
        """New requests may be admitted (the model must also be running)."""
        return self.stop is None and not self.drains

    @property
    def busy(self) -> bool:
        """Requests in flight or waiting, or a load under way: nothing may stop it."""
        return bool(self.in_flight or self.waiting or self.load)

    # Its load (the loads' own) ---------------------------------------------------------

    def load_began(self, task: asyncio.Task[None]) -> None:
        self.load = task

    def deciding_room(self, deciding: bool) -> None:
        """While the load decides on room it may be cancelled (nobody waits any more);
        once it has its room, cancelling would waste an eviction's work."""
        self.deciding = deciding

    def load_ended(self) -> None:
        self.load, self.deciding = None, False

    # Requests ------------------------------------------------------------------------

    def enqueue(self, limit: int) -> bool:
        """Take a place in the queue; False when `limit` requests already wait."""
        if self.waiting >= limit:
            return False
        self.waiting += 1
        return True

    def dequeue(self) -> bool:
        """Give the place back; True when nobody waits any more."""
        if self.waiting <= 0:
            raise AdmissionError(f"{self.name}: dequeue with nobody waiting")
        self.waiting -= 1
        return not self.waiting

    def admit(self, now: float, pid: int | None, keep_alive: float | None) -> Slot:
        """Count a request in flight to process `pid`; the caller checked `admits` in the
        same step. `keep_alive` 0 asks for an unload once the model is idle."""
        if not self.admits:
            raise AdmissionError(f"{self.name}: admit while {self.stop or 'draining'}")
        self.in_flight += 1
        self.last_used = now
        self.expires = None
        if keep_alive == 0:
            self.unload_pending = True
        elif keep_alive is not None:
            self.keep_alive, self.keep_pid = keep_alive, pid
        return self

    def release(self, now: float) -> bool:
        """A request ended; True when it was the last in flight."""
        if self.in_flight <= 0:
            raise AdmissionError(f"{self.name}: release with nothing in flight")
        self.in_flight -= 1
        self.last_used = now
        return not self.in_flight

    # Stops ---------------------------------------------------------------------------

    def claim_stop(self, why: StopWhy, cause: StopCause | None = None) -> bool:
        """Claim the model for a stop, if nothing uses it and nobody else stops or drains
        it; from here on it admits nothing until `end_stop`."""
        if self.busy or self.stop is not None or self.drains:
            return False
        self.stop, self.cause, self.expires, self.unload_pending = why, cause, None, False
        return True

    def end_stop(self) -> None:
        """The claimed stop is over, whatever it achieved."""
        self.stop, self.cause = None, None

    def ask_unload(self) -> bool:
        """An unload: True when it may stop now (claimed), else it waits for the last
        request to end."""
        if self.claim_stop(StopWhy.UNLOAD):
            return True
        if self.stop is None:
            self.unload_pending = True
        return False

    # Drains --------------------------------------------------------------------------

    def begin_drain(self) -> None:
        """A reload or restart holds the model: it admits nothing until `end_drain`."""
        self.drains += 1
        self.drained += 1
        self.expires = None

    def end_drain(self) -> None:
        """One drain is over."""
        if self.drains <= 0:
            raise AdmissionError(f"{self.name}: end_drain without a drain")
        self.drains -= 1

    # Loads ---------------------------------------------------------------------------

    def load_failed(self, now: float, reason: str, initial: float, maximum: float) -> None:
        """A load failed: refuse the next ones for a backoff that doubles per failure."""
        self.failures += 1
        self.refused_until = now + min(initial * 2 ** min(self.failures - 1, 32), maximum)
        self.refusal = reason

    def load_ok(self) -> None:
        """A load succeeded: the backoff starts over."""
        self.failures, self.refused_until, self.refusal = 0, 0.0, ""

    def refused(self, now: float) -> float:
        """Seconds until a load may be tried again (0: now)."""
        return max(0.0, self.refused_until - now)

    # Idle ----------------------------------------------------------------------------

    def timeout(self, configured: float | None, pid: int | None) -> float | None:
        """Seconds the model stays loaded after its last request, for process `pid`;
        None: for ever. A request's keep_alive outranks the configured value."""
        if self.keep_alive is not None and self.keep_pid == pid:
            return None if self.keep_alive < 0 else self.keep_alive
        return configured

    def arm(self, now: float, timeout: float | None) -> None:
        """Start the idle timer (the last request ended, or nothing armed it yet)."""
        self.expires = None if timeout is None else now + timeout
