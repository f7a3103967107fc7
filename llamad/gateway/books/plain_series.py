"""Counters and histograms for the series every relayed request updates, kept in plain
floats and turned into Prometheus families only when `/metrics` is scraped.

prometheus_client's own take a lock and check the metric's state on every update, and a
histogram walks its buckets in Python, nine times per relayed request. These are updated
and scraped on the event loop's thread only, so they need no lock. The exposition is the
same as prometheus_client's `Counter` and `Histogram` with the same names, labels and
buckets.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from typing import Generic, TypeVar

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, HistogramMetricFamily, Metric
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString


class CounterChild:
    """One label set's count."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0.0

    def inc(self, amount: float = 1.0) -> None:
        """Add `amount` (never negative: a counter only grows)."""
        if amount < 0:
            raise ValueError("counters can only be incremented by non-negative amounts")
        self.value += amount


class HistogramChild:
    """One label set's bucket counts (not cumulative) and sum."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0.0] * len(bounds)
        self.sum = 0.0

    def observe(self, amount: float) -> None:
        """Count `amount` in the first bucket whose upper bound holds it."""
        self.sum += amount
        self.counts[bisect_left(self.bounds, amount)] += 1


C = TypeVar("C", CounterChild, HistogramChild)


class _Labelled(Collector, Generic[C]):
    """A metric's children by label values, and its registration in `registry`."""

    def __init__(
        self,
        name: str,
        doc: str,
        labels: Sequence[str],
        registry: CollectorRegistry,
        child: Callable[[], C],
    ) -> None:
        self.name, self.doc, self.labelnames = name, doc, tuple(labels)
        self._child: Callable[[], C] = child
        self._children: dict[tuple[str, ...], C] = {}
        registry.register(self)

    def labels(self, *values: str) -> C:
        """The child for `values` (made on first use)."""
        child = self._children.get(values)
        if child is None:
            if len(values) != len(self.labelnames):
                raise ValueError(f"{self.name}: expected labels {self.labelnames}, got {values}")
            child = self._children[values] = self._child()
        return child


class PlainCounter(_Labelled[CounterChild]):
    """A labelled counter, as `prometheus_client.Counter(name, doc, labels, registry=)`."""

    def __init__(
        self, name: str, doc: str, labels: Sequence[str], registry: CollectorRegistry
    ) -> None:
        super().__init__(name, doc, labels, registry, CounterChild)

    def describe(self) -> Iterator[Metric]:
        """The family without samples: the registry refuses a name registered twice."""
        yield CounterMetricFamily(self.name, self.doc, labels=self.labelnames)

    def collect(self) -> Iterator[Metric]:
        family = CounterMetricFamily(self.name, self.doc, labels=self.labelnames)
        for values, child in list(self._children.items()):
            family.add_metric(values, child.value)
        yield family


class PlainHistogram(_Labelled[HistogramChild]):
    """A labelled histogram, as `prometheus_client.Histogram(name, doc, labels, buckets=,
    registry=)` (+Inf added as the last bound)."""

    def __init__(
        self,
        name: str,
        doc: str,
        labels: Sequence[str],
        buckets: Sequence[float],
        registry: CollectorRegistry,
    ) -> None:
        bounds = sorted(float(b) for b in buckets)
        if not bounds or bounds[-1] != float("inf"):
            bounds.append(float("inf"))
        self.bounds = tuple(bounds)
        self._les = [floatToGoString(b) for b in self.bounds]  # type: ignore[no-untyped-call]
        super().__init__(name, doc, labels, registry, lambda: HistogramChild(self.bounds))

    def describe(self) -> Iterator[Metric]:
        """The family without samples: the registry refuses a name registered twice."""
        yield HistogramMetricFamily(self.name, self.doc, labels=self.labelnames)

    def collect(self) -> Iterator[Metric]:
        family = HistogramMetricFamily(self.name, self.doc, labels=self.labelnames)
        for values, child in list(self._children.items()):
            acc, buckets = 0.0, []
            for le, count in zip(self._les, child.counts, strict=True):
                acc += count
                buckets.append((le, acc))
            family.add_metric(values, buckets, child.sum)
        yield family
