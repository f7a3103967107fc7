"""The page's one status document: the gateway, every model it routes, and with
`[gateway] fleet = true` each peer with its models, as this gateway last heard them."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llamad.backends.builtin_template import worth_saying
from llamad.backends.registry import template_line
from llamad.gateway.contract.caller import Caller
from llamad.gateway.core import Gateway
from llamad.gateway.fleet.models import PeerModels
from llamad.gateway.models.listing import model_entry

CacheOf = Callable[[str], dict[str, Any] | None]


def no_cache(name: str) -> dict[str, Any] | None:
    """The figures of a gateway that keeps no prompt cache (tests in process)."""
    return None


def status(gateway: Gateway, caller: Caller, cache_of: CacheOf = no_cache) -> dict[str, Any]:
    """`GET /ui/api/status`: what `caller` may see of it; `cache_of(name)` is an
    instance's prompt cache as status has it (`prompt_cache`)."""
    models = []
    for view in gateway.models(caller):
        if view.instances:  # an alias instances share: each shows on its own row
            continue
        if gateway.choosers.named(view.name):  # a name that chooses: `names` tells it
            continue
        entry = model_entry(view, gateway.created)
        if view.host is None:
            entry["gateway"] = gateway.status_of(view.name)
            entry |= _notes(gateway, view.name, cache_of)
        else:  # a fleet peer's: no actions, no log here
            entry["llamad"]["host"] = view.host
        models.append(entry)
    doc = gateway.status()
    if caller.scoped:  # a limited key sees its own usage, and its own models on devices
        doc["keys"] = {k: v for k, v in doc["keys"].items() if k == caller.name}
        doc["devices"] = [_visible(d, caller) for d in doc.get("devices", [])]
        doc["recent_stops"] = [
            {**s, "for_model": s["for_model"] if caller.may_use(s["for_model"] or "") else None}
            for s in doc.get("recent_stops", [])
            if caller.may_use(s["model"])
        ]
    out: dict[str, Any] = {"gateway": doc, "models": models}
    if gateway.fleet is not None and gateway.settings().fleet:
        seen = sorted(gateway.fleet.seen.values(), key=_name)
        out["fleet"] = [_peer(p, caller) for p in seen]
    return out


def _notes(gateway: Gateway, name: str, cache_of: CacheOf) -> dict[str, Any]:
    """What the page says under the model's name: its chat template, only a built-in one
    or none; why its prompt cache does not outlive the process, where llamad chose so
    (a sliding-window model's cost, a llama-server that cannot save, restores that
    reused nothing); and what its cache's restores did (`cache`)."""
    facts = gateway.router.find(name)
    if facts is None:
        return {"template_note": None, "cache_note": None, "cache": None}
    figures = cache_of(facts.name)
    note = figures["note"] if figures is not None else facts.spec.cache_note
    return {
        "template_note": worth_saying(template_line(facts.spec)),
        "cache_note": note,
        "cache": figures,
    }


def _visible(device: dict[str, Any], caller: Caller) -> dict[str, Any]:
    models = {n: b for n, b in device["models"].items() if caller.may_use(n)}
    return {**device, "models": models}


def _name(entry: PeerModels) -> str:
    return entry.peer.name


def _peer(entry: PeerModels, caller: Caller) -> dict[str, Any]:
    """One peer: where it is, whether it answers, and its models (once each, not per
    alias), those `caller` may use."""
    models = [m for key, m in entry.models.items() if key == m.name and caller.may_use(m.name)]
    return {
        "name": entry.peer.name,
        "source": entry.peer.source,
        "gateway": entry.gateway_url,
        "away": entry.error,
        "left_bytes": entry.left_bytes,
        "models": [
            {"name": m.name, "state": m.state, "on_demand": m.on_demand, "aliases": list(m.aliases)}
            for m in sorted(models, key=lambda m: m.name)
        ],
    }
