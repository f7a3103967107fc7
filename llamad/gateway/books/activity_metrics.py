"""Prometheus series fed by activity records: speed, TTFT and prompt-cache use by model,
usage by key name."""

from __future__ import annotations

from prometheus_client import CollectorRegistry

from llamad.gateway.books.activity import Record
from llamad.gateway.books.plain_series import PlainCounter, PlainHistogram

_TTFT = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_SPEED = (1, 2, 5, 10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 1000, 5000)


class ActivityMetrics:
    """A listener of `Activity` that keeps its histograms and per-key counters."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self.speed = PlainHistogram(
            "llamad_gateway_tokens_per_second",
            "Generation speed llama-server reported (timings.predicted_per_second).",
            ["model"],
            buckets=_SPEED,
            registry=registry,
        )
        self.ttft = PlainHistogram(
            "llamad_gateway_ttft_seconds",
            "From request to the first byte of the answer's body (its first token).",
            ["model"],
            buckets=_TTFT,
            registry=registry,
        )
        self.replica_requests = PlainCounter(
            "llamad_gateway_replica_requests",
            "Requests by model and the replica that served them (host: local or a peer).",
            ["model", "host", "instance"],
            registry=registry,
        )
        self.prompt_tokens = PlainCounter(
            "llamad_gateway_prompt_tokens",
            "Prompt tokens by model and source: cached (from the prompt cache) or evaluated.",
            ["model", "source"],
            registry=registry,
        )
        self.key_requests = PlainCounter(
            "llamad_gateway_key_requests",
            "Requests by key name and status.",
            ["key", "status"],
            registry=registry,
        )
        self.key_tokens = PlainCounter(
            "llamad_gateway_key_tokens",
            "Tokens by key name, kind (prompt or completion) and model.",
            ["key", "kind", "model"],
            registry=registry,
        )

    def __call__(self, r: Record) -> None:
        model = r.instance or "-"
        if r.tokens_per_s is not None and r.completion_tokens:
            self.speed.labels(model).observe(r.tokens_per_s)
        if r.ttft_s is not None and r.status < 400:
            self.ttft.labels(model).observe(r.ttft_s)
        if r.instance is not None:
            self.replica_requests.labels(r.model, r.host or "local", r.instance).inc()
        if r.prompt_cached is not None:
            self.prompt_tokens.labels(model, "cached").inc(r.prompt_cached)
        if r.prompt_evaluated is not None:
            self.prompt_tokens.labels(model, "evaluated").inc(r.prompt_evaluated)
        key = r.key or "-"
        self.key_requests.labels(key, str(r.status)).inc()
        if r.prompt_tokens:
            self.key_tokens.labels(key, "prompt", model).inc(r.prompt_tokens)
        if r.completion_tokens:
            self.key_tokens.labels(key, "completion", model).inc(r.completion_tokens)
