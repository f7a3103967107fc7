"""The per-request series in plain floats scrape exactly as prometheus_client's own."""

from __future__ import annotations

import pytest
from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

from llamad.gateway.books.plain_series import PlainCounter, PlainHistogram

pytestmark = pytest.mark.timeout(20)

# As the daemon's registry has it (api/metrics.py): no `_created` series.
disable_created_metrics()  # type: ignore[no-untyped-call]

BUCKETS = (0.001, 0.01, 0.1, 1, 10)
# On a bound, between bounds, past the last one, zero: each lands where Prometheus puts it.
SAMPLES = [0.0, 0.001, 0.0015, 0.01, 0.5, 1.0, 9.99, 10.0, 11.0, 1e6]


def test_histogram_scrapes_as_prometheus_client_does() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    plain = PlainHistogram("t_seconds", "Some time.", ["model"], BUCKETS, ours)
    real = Histogram("t_seconds", "Some time.", ["model"], buckets=BUCKETS, registry=theirs)
    assert generate_latest(ours) == generate_latest(theirs)  # no label set yet
    for i, value in enumerate(SAMPLES):
        model = "a" if i % 3 else 'b "quoted"'
        plain.labels(model).observe(value)
        real.labels(model).observe(value)
    assert generate_latest(ours) == generate_latest(theirs)


def test_counter_scrapes_as_prometheus_client_does() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    plain = PlainCounter("t_requests", "Requests.", ["model", "status"], ours)
    real = Counter("t_requests", "Requests.", ["model", "status"], registry=theirs)
    assert generate_latest(ours) == generate_latest(theirs)
    for model, status, amount in [("a", "200", 1.0), ("a", "499", 2.0), ("b", "200", 3.5)]:
        plain.labels(model, status).inc(amount)
        real.labels(model, status).inc(amount)
    plain.labels("a", "200").inc()
    real.labels("a", "200").inc()
    assert generate_latest(ours) == generate_latest(theirs)


def test_wrong_label_count_and_negative_increment_are_refused() -> None:
    registry = CollectorRegistry()
    counter = PlainCounter("t_c", "C.", ["model"], registry)
    histogram = PlainHistogram("t_h", "H.", ["model"], BUCKETS, registry)
    with pytest.raises(ValueError, match="expected labels"):
        counter.labels("a", "b")
    with pytest.raises(ValueError, match="expected labels"):
        histogram.labels()
    with pytest.raises(ValueError, match="non-negative"):
        counter.labels("a").inc(-1)
    with pytest.raises(ValueError, match="Duplicated"):  # a name registered twice
        PlainCounter("t_c", "C.", ["model"], registry)
