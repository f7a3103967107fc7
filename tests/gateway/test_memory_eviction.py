"""Eviction by memory with a real budget, sized from what the daemon itself counts.

A model's size is what the gateway plans with: its measured footprint (USS) once it has
run, else its estimate. The tests read both from the status document, then reload the
config with a budget that holds one model but not two (or not the always-on one and an
on-demand one), so no number here depends on the build of llama-server.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Any

import httpx
from gateway_helpers import TINY, Gw, chat, gateway
from helpers import wait_for
from test_reload_gateway import _toml

LAZY = {**TINY, "on_demand": True}


def _ask(gw: Gw, model: str) -> httpx.Response:
    return httpx.post(f"{gw.base}/v1/chat/completions", json=chat(model), timeout=30)


def _evicted(gw: Gw) -> list[str]:
    return [e["instance"] for e in gw.ld.events("gateway.evicted")]


def _mem(gw: Gw, name: str) -> dict[str, Any]:
    return dict(gw.ld.instance(name)["gateway"])


def _footprint(gw: Gw, name: str) -> int:
    """`name`'s measured footprint, once the gateway has taken it (it runs now)."""
    return int(wait_for(lambda: _mem(gw, name)["footprint_bytes"], 10, f"{name} measured"))


def _budget(gw: Gw, budget: int) -> None:
    """Reload the config with `memory_budget = budget` bytes; wait until it applies."""
    doc = tomllib.loads(gw.ld.config.read_text())
    doc["gateway"]["memory_budget"] = str(budget)
    gw.ld.config.write_text(_toml(doc))
    wait_for(lambda: gw.ld.status()["gateway"]["budget_bytes"] == budget, 10, "the new budget")


def _alone(gw: Gw, name: str) -> int:
    """Load `name` with nothing else on demand loaded, take its footprint, unload it."""
    assert _ask(gw, name).status_code == 200
    size = _footprint(gw, name)
    assert gw.ld.ctl("unload", name).returncode == 0
    return size


def test_memory_budget_evicts_the_least_recently_used(tiny_model: Path) -> None:
    with gateway(tiny_model, {"a": LAZY, "b": LAZY}, max_loaded=0, memory_budget="off") as gw:
        # Each one's size as the gateway will count it: measured, each loaded alone (as
        # they will be: two llama-servers share their libraries' pages, which USS omits).
        sizes = {m: _alone(gw, m) for m in ("a", "b")}
        budget = max(sizes.values()) * 3 // 2  # one fits, two do not
        assert sum(sizes.values()) > budget
        _budget(gw, budget)
        assert gw.ld.status()["gateway"]["left_bytes"] == budget  # nothing loaded

        assert _ask(gw, "a").status_code == 200
        assert _evicted(gw) == []
        doc = gw.ld.status()
        a = next(i for i in doc["instances"] if i["name"] == "a")["gateway"]
        # Once run, the measured footprint replaces the estimate in the budget.
        assert a["footprint_bytes"] not in (None, a["estimate_bytes"])
        assert doc["gateway"]["used_bytes"] == a["footprint_bytes"]
        assert doc["gateway"]["left_bytes"] < _mem(gw, "b")["footprint_bytes"]

        assert _ask(gw, "b").status_code == 200  # a goes first
        assert _evicted(gw) == ["a"]
        assert (gw.state("a"), gw.state("b")) == ("idle", "running")

        assert _ask(gw, "a").status_code == 200  # now b is the least recently used
        assert _evicted(gw) == ["a", "b"]
        assert (gw.state("a"), gw.state("b")) == ("running", "idle")
        told = [(e["cause"], e["for_model"]) for e in gw.ld.events("gateway.evicted")]
        assert told == [("memory", "b"), ("memory", "a")]
        assert gw.starts("a") == 3


def test_always_on_is_never_evicted_for_memory(tiny_model: Path) -> None:
    models = {"always": TINY, "lazy": LAZY}
    with gateway(tiny_model, models, memory_budget="off", queue_timeout=1.0) as gw:
        pid = gw.ld.running("always")
        held = _footprint(gw, "always")
        need = _mem(gw, "lazy")["estimate_bytes"]  # it has never run
        # Room for the on-demand model alone, not beside the always-on one.
        _budget(gw, need + held // 2)
        assert gw.ld.status()["gateway"]["left_bytes"] < need

        reply = _ask(gw, "lazy")
        assert reply.status_code == 503
        assert reply.elapsed.total_seconds() >= 1.0  # it waited for room first
        assert reply.json()["error"]["code"] == "queue_timeout"
        assert int(reply.headers["retry-after"]) > 0
        assert gw.ld.running("always") == pid
        assert gw.state("always") == "running"
        assert _evicted(gw) == []
        assert gw.starts("lazy") == 0
