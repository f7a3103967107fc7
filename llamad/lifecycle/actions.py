"""What the lifecycle machine asks the instance task to do, and the notices it gives.

Plain data, like `states.py`; `instance.Instance` carries each action out.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Spawn:
    """Launch the process; the result comes back as Spawned or SpawnFailed."""


@dataclass(frozen=True)
class AwaitWorkers:
    """Watch for the workers in `record.waiting_for`; deliver WorkersReady once they are."""


@dataclass(frozen=True)
class StopWaiting:
    """Stop watching for workers: the head is no longer waiting to launch."""


@dataclass(frozen=True)
class Signal:
    """Send a signal to the process group: "TERM" to ask, "KILL" to force."""

    name: str


@dataclass(frozen=True)
class Arm:
    """Arm the timer: after `delay` seconds, deliver Timer(token). Replaces any armed timer."""

    token: int
    delay: float


@dataclass(frozen=True)
class RestartScheduled:
    """Notice: an automatic restart will happen after `delay` seconds."""

    delay: float
    attempt: int
    reason: str


@dataclass(frozen=True)
class Failed:
    """Notice: the flap guard tripped; only a person or a config change clears it."""

    reason: str


Action = Spawn | AwaitWorkers | StopWaiting | Signal | Arm | RestartScheduled | Failed
