"""How far along a load is, estimated from the model's earlier loads (seconds per GB).

llama-server says nothing measurable while it loads (it logs, then answers /health), so
the estimate is the time this model's earlier loads took per GB of its size, or failing
that every model's; a first load shows only how long it has been going. The fraction
stops at 0.99 until the model serves.
"""

from __future__ import annotations

import statistics
from collections import deque
from typing import Any

GB = 1e9
KEEP = 5  # loads remembered per model


class LoadProgress:
    """Load starts and ends as the state watcher sees them, and the estimates they give."""

    def __init__(self) -> None:
        self._began: dict[str, tuple[float, int | None]] = {}
        self._per_gb: dict[str, deque[float]] = {}

    def observe(
        self, name: str, loading: bool, running: bool, size: int | None, now: float
    ) -> None:
        """One look at `name`: loading (starting) now, or serving."""
        if loading:
            self._began.setdefault(name, (now, size))
            return
        began = self._began.pop(name, None)
        if began is not None and running:
            t0, size0 = began
            gb = max((size0 or size or GB) / GB, 0.001)
            self._per_gb.setdefault(name, deque(maxlen=KEEP)).append((now - t0) / gb)

    def learned(self, name: str, seconds: float, size: int | None) -> None:
        """A load's duration measured by the gateway's own load, which knows it exactly;
        the watcher then learns nothing more from it."""
        began = self._began.pop(name, None)
        gb = max(((began and began[1]) or size or GB) / GB, 0.001)
        self._per_gb.setdefault(name, deque(maxlen=KEEP)).append(seconds / gb)

    def of(self, name: str, size: int | None, now: float) -> dict[str, Any] | None:
        """`{"elapsed_s", "expected_s", "fraction", "basis"}` while `name` loads, else None;
        `expected_s` and `fraction` are None with nothing to go by."""
        began = self._began.get(name)
        if began is None:
            return None
        elapsed = now - began[0]
        rate, basis = self._rate(name)
        gb = max((began[1] or size or GB) / GB, 0.001)
        expected = None if rate is None else rate * gb
        fraction = None
        if expected is not None:
            fraction = round(min(0.99, elapsed / expected) if expected > 0 else 0.99, 3)
        return {
            "elapsed_s": round(elapsed, 2),
            "expected_s": None if expected is None else round(expected, 2),
            "fraction": fraction,
            "basis": basis,
        }

    def _rate(self, name: str) -> tuple[float | None, str | None]:
        own = self._per_gb.get(name)
        if own:
            return statistics.median(own), "this model"
        every = [r for rates in self._per_gb.values() for r in rates]
        if every:
            return statistics.median(every), "other models"
        return None, None
