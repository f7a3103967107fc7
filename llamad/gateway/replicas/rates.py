"""What each model's answers have shown about its speed: the prompt rate its servers
reported, and how long its requests hold a slot.

The rate is read from each answer's `timings` (prompt tokens evaluated over `prompt_ms`,
which is llama-server's `prompt_per_second`), only from prompts long enough that the
per-request overhead does not hide it, and smoothed. A request's time is from its slot
taken to its slot given back, for answers that gave their counts; the median of the
last SERVICE_KEPT stands for the next.
"""

from __future__ import annotations

import statistics
from collections import deque
from dataclasses import dataclass, field

MIN_TOKENS = 32  # a shorter prompt's time is mostly the request's own overhead
SMOOTHING = 0.3  # weight of a new rate against what was seen before
SERVICE_KEPT = 32


@dataclass
class Speed:
    """One model's measured prompt rate and request times."""

    rate: float | None = None  # prompt tokens a second
    times: deque[float] = field(default_factory=lambda: deque(maxlen=SERVICE_KEPT))

    @property
    def service_s(self) -> float | None:
        """A typical request's seconds on its slot (None: none measured yet)."""
        return statistics.median(self.times) if self.times else None

    def took(self, seconds: float, rate: float | None) -> None:
        """One more request held its slot `seconds`; its prompt read at `rate` tokens a
        second (None: too short to tell)."""
        self.times.append(seconds)
        if rate is not None:
            self.rate = rate if self.rate is None else self.rate + SMOOTHING * (rate - self.rate)

    def to_dict(self) -> dict[str, float | None]:
        """As the gateway's status shows it."""
        service = self.service_s
        return {
            "prompt_tokens_per_s": None if self.rate is None else round(self.rate, 1),
            "request_s_p50": None if service is None else round(service, 3),
        }


class Rates:
    """Every model's `Speed`, by the name requests asked for."""

    def __init__(self) -> None:
        self._of: dict[str, Speed] = {}

    def of(self, model: str) -> Speed:
        """`model`'s speed (unmeasured until its first answer)."""
        speed = self._of.get(model)
        if speed is None:
            speed = self._of[model] = Speed()
        return speed

    def seen(self, model: str) -> Speed | None:
        """`model`'s speed if any answer was measured, without making one."""
        return self._of.get(model)

    def answered(
        self, model: str, seconds: float, evaluated: int | None, prompt_ms: float | None
    ) -> None:
        """A request for `model` held its slot `seconds`, and its server said it
        evaluated `evaluated` prompt tokens in `prompt_ms` (None: it did not say). Only
        an answer that gave its counts is timed: an error, or a client gone early, says
        nothing of how long a request holds a slot."""
        if evaluated is None:
            return
        rate = None
        if prompt_ms is not None and prompt_ms > 0 and evaluated >= MIN_TOKENS:
            rate = evaluated * 1000.0 / prompt_ms
        self.of(model).took(seconds, rate)
