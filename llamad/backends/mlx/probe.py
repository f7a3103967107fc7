"""Is an mlx_lm.server healthy? `/health` alone cannot tell.

mlx_lm.server answers `/health` 200 while the model still loads, and keeps its HTTP server
up after its generation thread died or wedged (mlx-lm #1672). So readiness is `/health`
200 followed by a one-token completion, liveness adds such a completion every
`deep_probe_interval`, and a 503 from `/health` (the thread is gone) is fatal.

Busy is not hung: mlx_lm.server generates one request at a time (always with a draft
model), so the one-token completion queues behind a long generation and times out. While
the gateway has a request in flight to the server no completion is sent (it would only
queue), and one that timed out while a request came is not held against the server; the
completions go on once it is idle.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Callable

from llamad.backends.probes import Health, Prober, server_url
from llamad.backends.spec import InstanceSpec
from llamad.lifecycle.states import Knobs

# No `model`: the server then uses the one it was started with ("default_model").
_ONE_TOKEN = json.dumps({"prompt": "Hi", "max_tokens": 1, "temperature": 0}).encode()


class DeepProbe:
    """`probe(timeout)` for one mlx_lm.server process; remembers when it last generated."""

    def __init__(
        self,
        spec: InstanceSpec,
        prober: Prober,
        knobs: Callable[[], Knobs],
        busy: Callable[[], bool] = lambda: False,
    ) -> None:
        self._prober = prober
        self._knobs = knobs
        self._busy = busy
        self._health = server_url(spec.probe_host, spec.port)
        self._complete = server_url(spec.probe_host, spec.port, "/v1/completions")
        self._ready = False
        self._failing = False
        self._last_deep = 0.0

    async def __call__(self, timeout: float) -> Health:
        """`/health`, then a one-token completion when one is due."""
        health = await self._prober.probe(self._health, timeout)
        if health.status == 503:
            error = "/health 503: the generation thread is gone"
            return dataclasses.replace(health, error=error, fatal=True)
        if not health.ok or not self._due():
            return health
        if self._ready and self._busy():
            return health  # the completion would only queue behind the generation
        deep = await self._prober.request(
            "POST", self._complete, self._knobs().deep_probe_timeout, _ONE_TOKEN
        )
        self._last_deep = time.monotonic()
        if deep.timed_out and self._ready and self._busy():
            return health  # a request came while it waited: queued behind it, not hung
        # A failed completion is retried on every probe until one succeeds, so that the
        # health checks in between don't reset the count of consecutive failures.
        self._failing = self._ready and not deep.ok
        self._ready = self._ready or deep.ok
        if deep.ok:
            return dataclasses.replace(deep, latency_ms=deep.latency_ms + health.latency_ms)
        return dataclasses.replace(deep, error=f"one-token completion: {deep.error}")

    def _due(self) -> bool:
        if not self._ready or self._failing:
            return True
        every = self._knobs().deep_probe_interval
        return every > 0 and time.monotonic() - self._last_deep >= every
