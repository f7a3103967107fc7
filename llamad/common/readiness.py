"""Whether this daemon takes new work: what a load balancer's readiness probe asks.

Kubernetes sends a pod traffic while its readiness probe passes, and keeps sending for a
few seconds after SIGTERM, until every node has seen the endpoint go: a daemon that stops
listening at once loses those requests. So readiness is its own answer, apart from
liveness (`/health`): it turns "stopping" at the signal while everything is still
served, and the listener lets each connection close after its answer meanwhile, so
clients reconnect to a peer the balancer still routes to.
"""

from __future__ import annotations

from typing import Literal

State = Literal["starting", "ready", "stopping"]


class Readiness:
    """Starting until `started()`, ready until `stopping()`; the daemon's main marks it,
    everything else reads it."""

    def __init__(self, *, started: bool = False) -> None:
        self._started = started
        self._stopping = False

    def started(self) -> None:
        """The instances launched at start have settled: new work is welcome."""
        self._started = True

    def stopping(self) -> None:
        """The daemon was told to stop: no new work, from now on, for good."""
        self._stopping = True

    @property
    def draining(self) -> bool:
        """Stopping: answers close their connections, so clients go elsewhere."""
        return self._stopping

    @property
    def state(self) -> State:
        """What `/ready` tells."""
        if self._stopping:
            return "stopping"
        return "ready" if self._started else "starting"
