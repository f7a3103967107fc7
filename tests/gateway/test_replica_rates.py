"""What a model's answers show of its speed: the prompt rate and the request time."""

from __future__ import annotations

import pytest

from llamad.gateway.replicas.rates import Rates

pytestmark = pytest.mark.timeout(10)


def test_the_rate_comes_from_prompts_long_enough_and_is_smoothed() -> None:
    rates = Rates()
    assert rates.seen("m") is None
    rates.answered("m", 0.5, 1000, 1000.0)  # 1,000 tokens a second
    rates.answered("m", 0.1, 10, 1.0)  # too short a prompt to time: its rate is ignored
    speed = rates.seen("m")
    assert speed is not None
    assert speed.rate == pytest.approx(1000.0)
    rates.answered("m", 0.5, 2000, 1000.0)  # 2,000 a second, weighing 0.3
    assert speed.rate == pytest.approx(1300.0)
    assert speed.service_s == pytest.approx(0.5)  # the median of 0.5, 0.1 and 0.5


def test_an_answer_without_counts_is_not_timed() -> None:
    rates = Rates()
    rates.answered("m", 0.01, None, None)  # an error, or a client that left
    assert rates.seen("m") is None
    rates.answered("m", 0.4, 100, 50.0)
    rates.answered("m", 0.02, None, None)
    speed = rates.seen("m")
    assert speed is not None
    assert speed.to_dict() == {"prompt_tokens_per_s": 2000.0, "request_s_p50": 0.4}
