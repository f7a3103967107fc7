"""How the gateway's routes see models: this llamad's instances and the fleet's, each
with the hosts of its replicas, read without waiting on a load."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from llamad.backends.registry import backend_for
from llamad.gateway.admission.idle import IdleTimers
from llamad.gateway.admission.progress import LoadProgress
from llamad.gateway.admission.scheduler import Scheduler
from llamad.gateway.contract.port import ModelView
from llamad.gateway.fleet.models import FleetModels, PeerModels
from llamad.gateway.fleet.peer_models import RemoteModel
from llamad.gateway.models.router import Router
from llamad.gateway.replicas.peer_upstream import remote_view
from llamad.gateway.replicas.replica import LOCAL
from llamad.lifecycle.states import State
from llamad.supervise.facts import Facts


class Views:
    """Model views over the router, the scheduler's slots and the fleet."""

    def __init__(
        self,
        router: Router,
        sched: Scheduler,
        idle: IdleTimers,
        progress: LoadProgress,
        fleet: Callable[[], FleetModels | None],
    ) -> None:
        self.router, self.sched, self.idle, self.progress = router, sched, idle, progress
        self.fleet = fleet  # None while `[gateway] fleet` is off

    def all(self) -> list[ModelView]:
        """Each model once, with the hosts of its replicas (this llamad first): every
        instance, each alias that instances share, then the fleet's that no local name
        shadows."""
        routable = self.router.routable()
        out = [self.local(f) for f in routable]
        for alias in dict.fromkeys(a for f in routable for a in f.spec.aliases):
            if found := self.router.sharing(alias):
                out.append(self.shared(alias, found))
        listed = {n for v in out for n in (v.name, *v.aliases)}
        for entry, model in self.fleet_models():
            if model.name not in listed:
                listed.add(model.name)
                view = remote_view(entry, model)
                out.append(replace(view, replicas=self._replicas(view)))
        return out

    def fleet_models(self) -> list[tuple[PeerModels, RemoteModel]]:
        """Every model a reachable peer serves (none while the fleet is off)."""
        fleet = self.fleet()
        return fleet.models() if fleet is not None else []

    def local(self, facts: Facts) -> ModelView:
        """This llamad's instance, with the peers serving it too."""
        view = self.view(facts)
        return replace(view, replicas=self._replicas(view, LOCAL))

    def shared(self, alias: str, found: list[Facts]) -> ModelView:
        """An alias several local instances share, as one model: the state, file and
        settings of the replica a request by it waits for (`_ahead`), its replicas
        `local/<instance>` then the peers."""
        views = [self.view(f) for f in found]
        view = replace(
            _ahead(views),
            name=alias,
            aliases=(),
            on_demand=all(v.on_demand for v in views),
            expires_at=max((v.expires_at or 0.0 for v in views), default=0.0) or None,
            instances=tuple(f.name for f in found),
        )
        return replace(view, replicas=self._replicas(view, *(f"{LOCAL}/{f.name}" for f in found)))

    def _replicas(self, view: ModelView, *first: str) -> tuple[str, ...]:
        """The hosts serving any of `view`'s names: `first`, then the peers."""
        fleet = self.fleet()
        peers = [] if fleet is None else [
            e.peer.name for n in (view.name, *view.aliases) for e, _ in fleet.candidates(n)
        ]  # fmt: skip
        return tuple(dict.fromkeys([*first, *peers]))

    def view(self, facts: Facts) -> ModelView:
        """An instance as the routes see it (no replicas)."""
        spec, settings = facts.spec, dict(facts.spec.settings)
        ctx = settings.get("LLAMA_ARG_CTX_SIZE")
        serving = backend_for(spec.kind).serving(spec)
        return ModelView(
            name=facts.name,
            aliases=spec.aliases,
            model_path=spec.model,
            state=facts.state.value,
            loaded=facts.state is State.RUNNING,
            on_demand=spec.on_demand,
            idle_timeout=self.sched.timeout(facts.name) or 0.0,
            expires_at=self.idle.expires_at(facts.name),
            size_bytes=self.sched.size(facts.name),
            ctx_size=int(ctx) if ctx and ctx.isdigit() else None,
            mmproj=serving.vision,
            serving=serving,
            load_progress=self.load_progress(facts.name),
            prompt=spec.prompt,
        )

    def load_progress(self, name: str) -> dict[str, Any] | None:
        """How far `name`'s load is (`progress.LoadProgress.of`), while it loads; for an
        alias several instances share, the load its requests wait for (`_ahead`)."""
        if found := self.router.sharing(name):
            shared = self.shared(name, found).load_progress
            return None if shared is None else dict(shared)
        facts = self.router.find(name)
        # The watcher looks every tick; the state itself says at once that a load ended.
        if facts is None or facts.state is not State.STARTING:
            return None
        return self.progress.of(name, self.sched.size(name), time.monotonic())


def _ahead(views: list[ModelView]) -> ModelView:
    """The replica a request by a shared alias waits for: one that serves (nothing to
    wait for), else the most advanced load (the largest estimated fraction, then the
    longest under way), else the first in the file."""
    if serving := [v for v in views if v.loaded]:
        return serving[0]
    loading = [v for v in views if v.state == State.STARTING.value]
    return max(loading, key=_advance, default=views[0])


def _advance(view: ModelView) -> tuple[float, float]:
    progress = view.load_progress or {}
    return progress.get("fraction") or 0.0, progress.get("elapsed_s") or 0.0
