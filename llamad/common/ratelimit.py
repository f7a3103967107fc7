"""Failed attempts per client address in a sliding window: the remote control API's
tokens and the gateway's keys are both guarded by one, so guessing is slow."""

from __future__ import annotations

import time
from collections import OrderedDict, deque
from collections.abc import Callable

MAX_FAILURES = 10
WINDOW_S = 60.0
# Bounds the memory an address-spraying client can make us spend (IPv6 makes it cheap).
MAX_TRACKED = 4096


class RateLimiter:
    """Failed attempts per client address in a sliding window, in memory only."""

    def __init__(
        self,
        max_failures: int = MAX_FAILURES,
        window_s: float = WINDOW_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_failures, self.window_s, self._clock = max_failures, window_s, clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()

    def __len__(self) -> int:
        """How many addresses have failures on record (0: nothing to look up)."""
        return len(self._failures)

    def _recent(self, client: str) -> deque[float]:
        times = self._failures.get(client)
        if times is None:
            return deque()
        horizon = self._clock() - self.window_s
        while times and times[0] <= horizon:
            times.popleft()
        if not times:
            del self._failures[client]
        return times

    def retry_after(self, client: str) -> float | None:
        """Seconds until `client` may try again, or None when it is not blocked."""
        times = self._recent(client)
        if len(times) < self.max_failures:
            return None
        return max(0.0, times[-self.max_failures] + self.window_s - self._clock())

    def fail(self, client: str) -> bool:
        """Count a failure; True when this one blocks the client."""
        times = self._failures.setdefault(client, deque())
        self._failures.move_to_end(client)
        times.append(self._clock())
        while len(self._failures) > MAX_TRACKED:
            self._failures.popitem(last=False)
        return len(self._recent(client)) == self.max_failures
