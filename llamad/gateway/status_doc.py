"""What the status document shows of the gateway: per instance, and daemon-wide."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from llamad.backends.registry import backend_for
from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.admission import memory
from llamad.gateway.admission.devices.ledger import Ledger
from llamad.gateway.admission.devices.placement import RAM
from llamad.gateway.admission.loads import LIVE
from llamad.gateway.admission.scheduler import Scheduler
from llamad.gateway.books.activity import Activity
from llamad.gateway.books.activity_stats import KeyTotals, model_rates
from llamad.gateway.books.recent_stops import RecentStops
from llamad.gateway.catalog import Views
from llamad.gateway.models.model_sets import ModelSets
from llamad.gateway.models.router import Router
from llamad.gateway.replicas.balancer import Balancer
from llamad.gateway.replicas.server_busy import STALE_S, ServerBusy


class StatusDoc:
    """The `gateway` objects of the status document."""

    def __init__(
        self,
        settings: Callable[[], GatewayConfig],
        router: Router,
        sched: Scheduler,
        views: Views,
        activity: Activity,
        key_totals: KeyTotals,
        balancer: Balancer,
        busy: ServerBusy,
        ledger: Ledger,
        sets: ModelSets,
        recent_stops: RecentStops,
    ) -> None:
        self.settings, self.router, self.sched, self.views = settings, router, sched, views
        self.activity, self.key_totals, self.balancer = activity, key_totals, balancer
        self.busy, self.ledger, self.sets, self.recent_stops = busy, ledger, sets, recent_stops

    def of(self, name: str) -> dict[str, Any]:
        """The `gateway` object of an instance in the status document."""
        slot = self.sched.slot(name)
        facts = self.router.find(name)
        expires = slot.expires
        return {
            "routable": facts is not None,
            "aliases": list(facts.spec.aliases) if facts else [],
            "on_demand": bool(facts and facts.spec.on_demand),
            "idle_timeout_s": self.sched.timeout(name),
            "idle_left_s": None if expires is None else round(expires - time.monotonic(), 1),
            "in_flight": slot.in_flight,
            "queued": slot.waiting,
            "slots": backend_for(facts.spec.kind).serving(facts.spec).slots if facts else None,
            "server": self._server(name),
            "relayed": {s: n for (i, s), n in self.balancer.relayed.items() if i == name},
            "speed": self._speed(name, facts.spec.aliases if facts else ()),
            "estimate_bytes": memory.estimate(facts.spec) if facts else None,
            "footprint_bytes": slot.measured,
            "devices": self.ledger.on(name) if facts else {},
            "placed": facts.device if facts else None,
            "load_progress": self.views.load_progress(name),
            **self.sets.status_of(name),
            **model_rates(self.activity).get(name, {}),
        }

    def _speed(self, name: str, aliases: tuple[str, ...]) -> dict[str, Any]:
        """What replicated requests by each name it answers to showed of the model's
        speed: the prompt rate and request time the balancer weighs a cache against."""
        rates = self.balancer.rates
        return {n: s.to_dict() for n in (name, *aliases) if (s := rates.seen(n)) is not None}

    def _server(self, name: str) -> dict[str, Any] | None:
        """What a replica's own server last said it runs (the balancer's cross-check),
        or None: not a replica, not read, or the reading is stale."""
        reading = self.busy.reading(name)
        age = None if reading is None else self.busy.clock() - reading.at
        if reading is None or age is None or age > STALE_S:
            return None
        return {"processing": reading.processing, "slots": reading.slots, "age_s": round(age, 2)}

    def devices(self) -> list[dict[str, Any]]:
        """Each GPU's budget, use and models (`gateway.devices`; empty: RAM alone)."""
        return self.ledger.devices_doc(f.name for f in self.router.routable() if f.state in LIVE)

    def daemon(self) -> dict[str, Any]:
        """The daemon-wide `gateway` object: where it listens and the memory budget."""
        cfg = self.settings()
        live = [f for f in self.router.routable() if f.state in LIVE]
        used = sum(self.sched.size(f.name) or 0 for f in live)
        budget = self.ledger.budgets(f.name for f in live)[RAM]
        return {
            "listen": f"{cfg.host}:{cfg.port}",
            "max_loaded": cfg.max_loaded,
            "memory_budget": cfg.memory_budget if cfg.memory_budget == "auto" else budget,
            "budget_bytes": budget,
            "used_bytes": used,
            "left_bytes": None if budget is None else budget - used,
            "devices": self.devices(),
            "keys": self.key_totals.to_dict(),
            "recent_stops": self.recent_stops.to_list(),
            **self.sets.status(),
        }
