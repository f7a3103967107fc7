"""The vocabulary of the instance lifecycle: states, events and the record (the actions
the machine asks for are in `actions.py`).

Everything here is plain data. `machine.step` is the only place that decides what an
event means; `instance.Instance` carries the actions out.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class State(StrEnum):
    """Supervisor's process states; FAILED is its FATAL."""

    STOPPED = "stopped"
    STARTING = "starting"
    RUNNING = "running"
    BACKOFF = "backoff"
    STOPPING = "stopping"
    FAILED = "failed"
    # Stopped by llamad for want of requests (the gateway's idle timer or an eviction), not
    # by a person: fine, and the next request starts it again. Behaves like STOPPED.
    IDLE = "idle"


@dataclass(frozen=True)
class Knobs:
    """The `[supervise]` settings that drive the state machine and the probes."""

    health_interval: float = 5.0
    health_timeout: float = 2.0
    unhealthy_after: int = 3
    start_timeout: float = 600.0
    stop_timeout: float = 10.0
    backoff_initial: float = 1.0
    backoff_max: float = 60.0
    max_restarts: int = 5
    restart_window: float = 600.0
    # Backends with a deep probe (a one-token generation): how often, 0 = never, and how
    # long one may take.
    deep_probe_interval: float = 60.0
    deep_probe_timeout: float = 30.0
    # Fraction of the backoff delay that jitter may add or take away.
    backoff_jitter: float = 0.1


@dataclass(frozen=True)
class Record:
    """Everything the machine remembers about one instance between events."""

    state: State = State.STOPPED
    pid: int | None = None
    # Consecutive failed starts; drives the backoff delay, reset on reaching RUNNING.
    failures: int = 0
    # Monotonic times of automatic restarts, pruned to restart_window: the flap guard.
    restart_times: tuple[float, ...] = ()
    # Every automatic restart since the daemon started (status `restarts`).
    restarts: int = 0
    probe_failures: int = 0
    # True once we SIGKILLed the current process (start deadline, hung server): the exit
    # that follows is ours, and `error` says why. Cleared with the pid.
    killed: bool = False
    # An RPC head's workers that were not ready when it was due to launch; while this is
    # not empty the head is STARTING without a process, and a waiter watches for them.
    waiting_for: tuple[str, ...] = ()
    # Where STOPPING leads once the process has exited: STOPPED, IDLE or STARTING.
    then: State = State.STOPPED
    # Token of the one armed timer; a Timer event with another token is stale.
    timer: int = 0
    error: str | None = None
    # The device the latest Start placed the process on (None: as the config says); kept
    # across restarts until the next Start.
    device: str | None = None


# Events -------------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """An admin start or autostart; also clears FAILED. `device` is where the gateway
    placed the model (llama-server's `--device`), for this start and its restarts; None
    leaves it where the config says."""

    device: str | None = None


@dataclass(frozen=True)
class Stop:
    """An admin stop, removal from the config, or daemon shutdown; `idle` when the
    gateway unloads an instance nobody uses (its idle timer, an eviction): it ends IDLE."""

    idle: bool = False


@dataclass(frozen=True)
class Restart:
    """An admin restart (or a changed spec): stop gracefully, then start."""


@dataclass(frozen=True)
class Spawned:
    """The process was launched."""

    pid: int


@dataclass(frozen=True)
class SpawnFailed:
    """The process could not be launched (port taken, model missing, exec error)."""

    reason: str


@dataclass(frozen=True)
class WorkersMissing:
    """The launch was put off: these RPC workers are not ready yet."""

    names: tuple[str, ...]


@dataclass(frozen=True)
class WorkersReady:
    """The workers a waiting head named are ready (remote ones: found running)."""


@dataclass(frozen=True)
class Exited:
    """The process `pid` exited (already reaped)."""

    pid: int
    reason: str | None = None


@dataclass(frozen=True)
class Ready:
    """`/health` answered 200 for the process `pid`."""

    pid: int


@dataclass(frozen=True)
class ProbeOk:
    """A liveness probe of `pid` succeeded."""

    pid: int


@dataclass(frozen=True)
class ProbeFailed:
    """A liveness probe of `pid` failed (timeout, refused, non-200)."""

    pid: int
    reason: str = ""
    # The server said it cannot recover (mlx_lm.server's /health 503): kill now, don't count.
    fatal: bool = False


@dataclass(frozen=True)
class Timer:
    """The armed timer fired: start deadline, backoff delay or stop deadline."""

    token: int


Event = (
    Start
    | Stop
    | Restart
    | Spawned
    | SpawnFailed
    | WorkersMissing
    | WorkersReady
    | Exited
    | Ready
    | ProbeOk
    | ProbeFailed
    | Timer
)
