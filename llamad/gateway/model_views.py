"""Model views for listings: this host's models and the fleet's, read without waiting.

Built only when something lists or looks a model up (`/v1/models`, Ollama's tags, the
page); a relayed request carries its resolved name on its `Upstream` instead.
"""

from __future__ import annotations

import time
from typing import Any

from llamad.backends.registry import backend_for
from llamad.gateway import keys
from llamad.gateway.fleet import PeerModels, RemoteModel
from llamad.gateway.fleet_lease import FleetLease
from llamad.gateway.idle import IdleTimers
from llamad.gateway.port import ModelView
from llamad.gateway.progress import LoadProgress
from llamad.gateway.router import Router
from llamad.gateway.scheduler import Scheduler
from llamad.lifecycle.states import State
from llamad.supervise.facts import Facts


class Views:
    """`ModelView`s of the routable models, and how far a load has come."""

    def __init__(
        self,
        router: Router,
        sched: Scheduler,
        idle: IdleTimers,
        progress: LoadProgress,
        fleet: FleetLease,
    ) -> None:
        self.router, self.sched, self.idle = router, sched, idle
        self.progress, self.fleet = progress, fleet

    def models(self) -> list[ModelView]:
        """Every routable model the caller's key may use: this host's, then the fleet's
        that no local name shadows."""
        return [v for v in self._all() if keys.may_use(v.name)]

    def _all(self) -> list[ModelView]:
        local = [self.view(f) for f in self.router.routable()]
        names = {n for v in local for n in (v.name, *v.aliases)}
        remote = [remote_view(e, m) for e, m in self.fleet.models() if m.name not in names]
        return local + remote

    def find(self, name: str) -> ModelView | None:
        """The model named `name` (instance name or alias), or None."""
        facts = self.router.find(name)
        if facts is not None:
            return self.view(facts)
        return next((v for v in self._all() if name in (v.name, *v.aliases)), None)

    def view(self, facts: Facts) -> ModelView:
        """The view of one local instance."""
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
        )

    def load_progress(self, name: str) -> dict[str, Any] | None:
        """How far `name`'s load is (`progress.LoadProgress.of`), while it loads."""
        facts = self.router.find(name)
        # The watcher looks every tick; the state itself says at once that a load ended.
        if facts is None or facts.state is not State.STARTING:
            return None
        return self.progress.of(name, self.sched.size(name), time.monotonic())


def remote_view(entry: PeerModels, model: RemoteModel) -> ModelView:
    """A peer's model as the gateway's routes see it, with its host."""
    return ModelView(
        name=model.name,
        aliases=model.aliases,
        model_path=None,
        state=model.state,
        loaded=model.loaded,
        on_demand=model.on_demand,
        idle_timeout=0.0,
        expires_at=None,
        size_bytes=None,
        ctx_size=None,
        mmproj=False,
        host=entry.peer.name,
    )
