"""Prometheus metrics at `GET /metrics`, read from the live state at scrape time.

Gauges and counters are computed from the supervisor when scraped (nothing to keep in
step); only the probe-latency histogram accumulates. With `[daemon] reexport_metrics`,
each instance's own `/metrics` (llama-server `--metrics`) is appended with a `name`
label, so one scrape target covers the host.

The per-instance label is `name`, not `instance`: Prometheus sets `instance` on every
target and would rename ours to `exported_instance`.
"""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Iterator
from typing import Any

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    disable_created_metrics,
    generate_latest,
)
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    InfoMetricFamily,
    Metric,
    SummaryMetricFamily,
)
from prometheus_client.registry import Collector

from llamad import __version__
from llamad.api.cache import cache_figures
from llamad.api.reexport import relabel
from llamad.backends.local_http import Client
from llamad.backends.probes import Health, server_url
from llamad.lifecycle.states import State
from llamad.supervise.daemon_state import DaemonState

LABEL = "name"
# A `_created` series per histogram is noise in the 0.0.4 text format: Prometheus stores
# it as one more gauge.
disable_created_metrics()  # type: ignore[no-untyped-call]
_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)


class Metrics:
    """The daemon's registry: one per daemon, so tests can run several side by side."""

    def __init__(self, state: DaemonState) -> None:
        self.state = state
        self.registry = CollectorRegistry()
        self.probe_seconds = Histogram(
            "llamad_health_probe_seconds",
            "Latency of health probes (GET /health, or a TCP connect for rpc workers).",
            [LABEL],
            buckets=_BUCKETS,
            registry=self.registry,
        )
        self.refused = Counter(
            "llamad_connections_refused",
            "Requests and connections a listener refused or closed, by reason "
            "(head_too_large, body_too_large, deadline, host_required, coding_not_implemented, "
            "version_not_supported, share, capped, *_evicted_idle, *_evicted_surplus).",
            ["listener", "reason"],
            registry=self.registry,
        )
        self.probes_excused = Counter(
            "llamad_probes_excused",
            "Failed probes not held against the instance: made late by llamad's own "
            "event loop (loop_late) or not made for want of descriptors (local).",
            [LABEL, "reason"],
            registry=self.registry,
        )
        self.registry.register(_Live(state))
        ProcessCollector(registry=self.registry)

    def observe_probe(self, name: str, health: Health) -> None:
        """Record one probe's latency (the instance's probe hook)."""
        if health.local:
            reason = "loop_late" if health.loop_lag is not None else "local"
            self.probes_excused.labels(name, reason).inc()
            return
        self.probe_seconds.labels(name).observe(health.latency_ms / 1000)

    def count_refused(self, listener: str, reason: str) -> None:
        """Count one refusal (a listener's `Refusals` hook)."""
        self.refused.labels(listener, reason).inc()

    async def render(self, client: Client | None = None) -> bytes:
        """The exposition text; with a client and the option on, instances' own metrics too."""
        own = generate_latest(self.registry)
        if client is None or not self.state.resolved.daemon.reexport_metrics:
            return own
        names = self._exporters()
        texts = await asyncio.gather(*(self._fetch(client, n) for n in names))
        return own + relabel(dict(zip(names, texts, strict=True))).encode()

    def _exporters(self) -> list[str]:
        insts = self.state.supervisor.instances.values()
        return sorted(
            i.spec.name
            for i in insts
            if i.record.state is State.RUNNING
            and dict(i.spec.settings).get("LLAMA_ARG_ENDPOINT_METRICS") in ("true", "1", "on")
        )

    async def _fetch(self, client: Client, name: str) -> str:
        spec = self.state.supervisor.instances[name].spec
        headers = {"Authorization": f"Bearer {spec.api_key}"} if spec.api_key else {}
        try:
            url = server_url(spec.probe_host, spec.port, "/metrics")
            reply = await client.request("GET", url, 2, headers=headers)
        except OSError:
            return ""
        return reply.body.decode("utf-8", "replace") if reply.status == 200 else ""


class _Live(Collector):
    """Per-instance and daemon metrics, read from the supervisor at scrape time."""

    def __init__(self, state: DaemonState) -> None:
        self.state = state

    def collect(self) -> Iterator[Metric]:
        r = self.state
        up = GaugeMetricFamily("llamad_instance_up", "1 when running and healthy.", labels=[LABEL])
        state = GaugeMetricFamily(
            "llamad_instance_state",
            "1 for the instance's current state.",
            labels=[LABEL, "state"],
        )
        restarts = CounterMetricFamily(
            "llamad_instance_restarts",
            "Automatic restarts since llamad started.",
            labels=[LABEL],
        )
        code = GaugeMetricFamily(
            "llamad_instance_last_exit_code",
            "Exit code of the last exit; 128+N when killed by signal N.",
            labels=[LABEL],
        )
        started = GaugeMetricFamily(
            "llamad_instance_start_time_seconds",
            "Start time of the instance's current process, seconds since the epoch.",
            labels=[LABEL],
        )
        restores = CounterMetricFamily(
            "llamad_cache_restores",
            "Saved slots restored, by what the next request reused: hit or miss.",
            labels=[LABEL, "outcome"],
        )
        saved = CounterMetricFamily(
            "llamad_cache_tokens_saved",
            "Prompt tokens taken from a restored cache instead of evaluated.",
            labels=[LABEL],
        )
        stopped = GaugeMetricFamily(
            "llamad_cache_stopped",
            "1 while the instance's saves are stopped: its restores reused nothing.",
            labels=[LABEL],
        )
        times = SummaryMetricFamily(
            "llamad_cache_restore_seconds",
            "Time to restore a saved slot (quantiles 0.5 and 0.95 of the last 128).",
            labels=[LABEL],
        )
        held = GaugeMetricFamily(
            "llamad_cache_bytes",
            "Bytes of the instance's saved slots on disk.",
            labels=[LABEL],
        )
        cache = r.supervisor.runtime.cache
        for inst in r.supervisor.instances.values():
            name, rec = inst.spec.name, inst.record
            figures = cache_figures(inst.spec, cache)
            held.add_metric([name], figures["bytes"])
            judged = figures["restores"]
            if judged is not None:
                restores.add_metric([name, "hit"], judged["hits"])
                restores.add_metric([name, "miss"], judged["misses"])
                saved.add_metric([name], judged["tokens_saved"])
                stopped.add_metric([name], 1.0 if judged["stopped"] else 0.0)
                _restore_times(times, name, judged)
            healthy = rec.state is State.RUNNING and inst.health is not None and inst.health.ok
            up.add_metric([name], 1.0 if healthy else 0.0)
            for s in State:
                state.add_metric([name, s.value], 1.0 if rec.state is s else 0.0)
            restarts.add_metric([name], rec.restarts)
            if inst.last_exit is not None:
                ex = inst.last_exit
                sig = signal.Signals[ex.signal].value + 128 if ex.signal else None
                code.add_metric([name], float(ex.code if ex.code is not None else sig or 0))
            if inst.child is not None:
                started.add_metric([name], inst.child.started_at)
        yield from (up, state, restarts, code, started, restores, saved, stopped, times, held)
        yield CounterMetricFamily("llamad_reloads", "Config reloads applied.", value=r.reloads)
        yield GaugeMetricFamily(
            "llamad_config_error",
            "1 while the config file on disk is invalid.",
            value=1.0 if r.config_error else 0.0,
        )
        info = InfoMetricFamily("llamad_build", "llamad and llama-server versions.")
        info.add_metric(
            [], {"version": __version__, "llama_server": r.resolved.llama_server_version}
        )
        yield info


def _restore_times(family: SummaryMetricFamily, name: str, judged: dict[str, Any]) -> None:
    """One instance's restore times: their count and sum, and the two quantiles status
    shows (none before the first restore)."""
    family.add_metric([name], judged["restores"], judged["restore_ms_total"] / 1000)
    for q, key in (("0.5", "restore_ms_p50"), ("0.95", "restore_ms_p95")):
        if judged[key] is not None:
            labels = {LABEL: name, "quantile": q}
            family.add_sample(family.name, labels, judged[key] / 1000)
