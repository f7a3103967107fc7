"""The gateway's Prometheus series, registered in the daemon's registry.

Counters and histograms accumulate as requests pass (those every request updates in
plain floats: `plain_series.py`); the in-flight and queued gauges are read from the
scheduler when scraped, so nothing has to be kept in step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from llamad.gateway.books.plain_series import PlainCounter, PlainHistogram

_LATENCY = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_LOADS = (0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600)

Counts = Callable[[], dict[str, tuple[int, int]]]  # model -> (in flight, queued)
Devices = Callable[[], list[dict[str, Any]]]  # the status document's gateway.devices


class GatewayMetrics:
    """Requests, latency, time to first byte, loads, evictions and idle stops."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        r = registry or CollectorRegistry()
        self.registry = r
        self.requests = PlainCounter(
            "llamad_gateway_requests",
            "Requests by model and status.",
            ["model", "status"],
            registry=r,
        )
        self.latency = PlainHistogram(
            "llamad_gateway_request_seconds",
            "From request to the end of the response.",
            ["model"],
            buckets=_LATENCY,
            registry=r,
        )
        self.ttfb = PlainHistogram(
            "llamad_gateway_ttfb_seconds",
            "From request to the first byte of the response.",
            ["model"],
            buckets=_LATENCY,
            registry=r,
        )
        self.loads = Counter(
            "llamad_gateway_loads",
            "On-demand loads by outcome.",
            ["model", "outcome"],
            registry=r,
        )
        self.load_seconds = Histogram(
            "llamad_gateway_load_seconds",
            "From a load's start to the model answering.",
            ["model"],
            buckets=_LOADS,
            registry=r,
        )
        self.evictions = Counter(
            "llamad_gateway_evictions", "Models stopped to make room.", ["model"], registry=r
        )
        self.idle_stops = Counter(
            "llamad_gateway_idle_stops",
            "Models stopped by their idle timer.",
            ["model"],
            registry=r,
        )

    def watch(self, counts: Counts) -> None:
        """Serve the in-flight and queued gauges from `counts` at scrape time."""
        self.registry.register(_Gauges(counts))

    def watch_devices(self, devices: Devices) -> None:
        """Serve each device's budget and use from `devices` at scrape time."""
        self.registry.register(_DeviceGauges(devices))


class _Gauges(Collector):
    def __init__(self, counts: Counts) -> None:
        self._counts = counts

    def collect(self) -> Iterator[Metric]:
        flying = GaugeMetricFamily(
            "llamad_gateway_in_flight", "Requests being served, by model.", labels=["model"]
        )
        queued = GaugeMetricFamily(
            "llamad_gateway_queued", "Requests waiting for a load or for room.", labels=["model"]
        )
        for model, (n_flying, n_queued) in sorted(self._counts().items()):
            flying.add_metric([model], n_flying)
            queued.add_metric([model], n_queued)
        yield flying
        yield queued


class _DeviceGauges(Collector):
    def __init__(self, devices: Devices) -> None:
        self._devices = devices

    def collect(self) -> Iterator[Metric]:
        budget = GaugeMetricFamily(
            "llamad_gateway_device_budget_bytes",
            "What each GPU (or Metal's working set) gives models.",
            labels=["device"],
        )
        used = GaugeMetricFamily(
            "llamad_gateway_device_used_bytes",
            "What the gateway's models hold on each GPU.",
            labels=["device"],
        )
        for d in self._devices():
            if d["budget_bytes"] is not None:
                budget.add_metric([d["name"]], d["budget_bytes"])
            used.add_metric([d["name"]], d["used_bytes"])
        yield budget
        yield used
