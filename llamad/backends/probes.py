"""Health probes: `GET /health` through the daemon's one client for its children.

llama-server answers 503 while loading and 200 once ready; only `/health` means ready
(`/v1/models` answers 200 during the load).

The client (local_http.py) keeps a connection alive to each server between probes.
The pacing of one process's probes is health_watch.py's.
"""

from __future__ import annotations

import dataclasses
import errno
import time
from dataclasses import dataclass

from llamad.backends.local_http import Client
from llamad.common.clock import utcnow
from llamad.common.looplag import LagWatch

# A probe that timed out while our own loop was this late (a fraction of its timeout, at
# least LATE_MIN_S) is not held against the server: its answer may have sat unread.
LATE_FRACTION = 0.1
LATE_MIN_S = 0.05


@dataclass(frozen=True)
class Health:
    """The last probe of an instance: an attribute beside its state, not a state."""

    ok: bool
    status: int | None
    latency_ms: float
    checked_at: str
    error: str | None = None
    # The probe failed on our side (EMFILE, ENOBUFS): it says nothing about the server.
    local: bool = False
    fatal: bool = False  # the server says it cannot recover: restart without more probes
    loop_lag: float | None = None  # set when timed out while our loop was this late (s)
    timed_out: bool = False  # no answer within the timeout (a busy server's, or a hung one's)

    def to_dict(self) -> dict[str, object]:
        """The `health` object of the status document."""
        return {
            "ok": self.ok,
            "status": self.status,
            "latency_ms": round(self.latency_ms, 2),
            "checked_at": self.checked_at,
        }


def server_url(host: str, port: int, path: str = "/health") -> str:
    """`http://host:port/path`, with an IPv6 host in brackets."""
    return f"http://[{host}]:{port}{path}" if ":" in host else f"http://{host}:{port}{path}"


class Prober:
    """Runs single probes; the pacing belongs to the instance that asks."""

    def __init__(self, client: Client | None = None) -> None:
        self.client = client or Client()

    async def aclose(self) -> None:
        """Close the client's kept connections."""
        self.client.close()

    async def probe(self, url: str, timeout: float) -> Health:
        """One `GET /health`: ok only on 200."""
        return await self.request("GET", url, timeout)

    async def request(
        self, method: str, url: str, timeout: float, body: bytes | None = None
    ) -> Health:
        """One request, its whole answer read (a JSON `body` for a POST): ok only on 200."""
        t0 = time.perf_counter()
        lag = LagWatch(max(LATE_MIN_S, timeout * LATE_FRACTION) / 2)
        try:
            with lag:
                reply = await self.client.request(method, url, timeout, body)
        except TimeoutError:
            if lag.worst >= max(LATE_MIN_S, timeout * LATE_FRACTION):
                return loop_late(t0, lag.worst)
            late = self._result(False, None, t0, f"no answer within {timeout:g}s")
            return dataclasses.replace(late, timed_out=True)
        except OSError as exc:
            if (cause := local_cause(exc)) is not None:
                return local_failure(t0, cause)
            return self._result(False, None, t0, _short(exc))
        if reply.status == 200:
            return self._result(True, 200, t0, None)
        return self._result(False, reply.status, t0, f"HTTP {reply.status}")

    @staticmethod
    def _result(ok: bool, status: int | None, t0: float, error: str | None) -> Health:
        return Health(ok, status, (time.perf_counter() - t0) * 1000, utcnow(), error)


# Errors that mean this process (or host) is short of something, not that the server is.
_LOCAL_ERRNOS = {errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM}


def local_cause(exc: BaseException) -> OSError | None:
    """The OSError behind `exc` if it is a shortage on our side (EMFILE, ENOBUFS...)."""
    seen: BaseException | None = exc
    for _ in range(8):  # an error raised from an OSError: the chain is short
        if seen is None:
            return None
        if isinstance(seen, OSError) and seen.errno in _LOCAL_ERRNOS:
            return seen
        seen = seen.__cause__ or seen.__context__
    return None


def local_failure(t0: float, cause: OSError) -> Health:
    """A probe that could not be made here: not evidence against the instance."""
    error = f"probe not made: {cause.strerror or cause}"
    return Health(False, None, (time.perf_counter() - t0) * 1000, utcnow(), error, local=True)


def loop_late(t0: float, lag: float) -> Health:
    """A probe that timed out while llamad's own loop was `lag` seconds late."""
    error = f"probe timed out while llamad's event loop was {lag:.2f}s late"
    took = (time.perf_counter() - t0) * 1000
    return Health(False, None, took, utcnow(), error, local=True, loop_lag=lag)


def _short(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    return f"{type(exc).__name__}: {exc}"[:200] or type(exc).__name__
