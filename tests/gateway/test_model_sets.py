"""Pins, groups, exclusive sets and names that choose, end to end on llama-server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from gateway_helpers import TINY, Gw, chat, gateway
from helpers import wait_for

LAZY = {**TINY, "on_demand": True}
PINNED = {**LAZY, "evict": "never"}


def _ask(gw: Gw, model: str, headers: dict[str, str] | None = None) -> httpx.Response:
    url = f"{gw.base}/v1/chat/completions"
    return httpx.post(url, json=chat(model), headers=headers, timeout=30)


def _evicted(gw: Gw) -> list[str]:
    return [e["instance"] for e in gw.ld.events("gateway.evicted")]


def _idle(gw: Gw, *names: str) -> None:
    for name in names:
        wait_for(lambda n=name: gw.state(n) == "idle", 15, f"{name} idle")  # type: ignore[misc]


def _gateway_of(gw: Gw, name: str) -> dict[str, Any]:
    return dict(gw.ld.instance(name)["gateway"])


def test_a_pinned_model_is_never_evicted(tiny_model: Path) -> None:
    with gateway(tiny_model, {"a": PINNED, "b": LAZY}, max_loaded=1) as gw:
        assert _ask(gw, "a").status_code == 200
        refused = _ask(gw, "b")
        assert refused.status_code == 503
        message = refused.json()["error"]["message"]
        assert "pinned model 'a'" in message, message
        assert "\n" not in message
        assert gw.state("a") == "running"
        assert _evicted(gw) == []
        status = _gateway_of(gw, "a")
        # No idle stop either: what it is pinned for is its warm cache.
        assert (status["pinned"], status["idle_timeout_s"]) == (True, None)
        assert _gateway_of(gw, "b")["pinned"] is False
        assert "pinned: a" in gw.ld.ctl("status").stdout


def test_loading_one_of_an_exclusive_set_stops_the_others(tiny_model: Path) -> None:
    exclusive = {"big": {"models": ["a", "b"]}}
    with gateway(tiny_model, {"a": LAZY, "b": LAZY, "c": LAZY}, exclusive=exclusive) as gw:
        assert [_ask(gw, m).status_code for m in ("a", "c", "b")] == [200, 200, 200]
        assert _evicted(gw) == ["a"]  # c is in no set: it stays
        (why,) = gw.ld.events("gateway.evicted")
        assert (why["cause"], why["for_model"], why["set"]) == ("exclusive", "b", "big")
        _idle(gw, "a")
        assert (gw.state("b"), gw.state("c")) == ("running", "running")
        assert _gateway_of(gw, "b")["exclusive"] == "big"


def test_a_pinned_model_in_an_exclusive_set_refuses_the_others(tiny_model: Path) -> None:
    exclusive = {"big": {"models": ["a", "b"]}}
    with gateway(tiny_model, {"a": PINNED, "b": LAZY}, exclusive=exclusive) as gw:
        assert _ask(gw, "a").status_code == 200
        refused = _ask(gw, "b")
        assert refused.status_code == 503
        assert "pinned model 'a'" in refused.json()["error"]["message"]
        assert gw.state("a") == "running"


def test_a_group_loads_and_unloads_as_one(tiny_model: Path) -> None:
    groups = {"pair": {"models": ["a", "b"]}}
    models = {"a": LAZY, "b": LAZY, "c": LAZY}
    with gateway(tiny_model, models, max_loaded=2, groups=groups) as gw:
        assert _ask(gw, "a").status_code == 200
        wait_for(lambda: gw.state("b") == "running", 30, "b loaded along with a")
        # c needs one place: the least recently used of the pair goes, and takes the other.
        assert _ask(gw, "c").status_code == 200
        _idle(gw, "a", "b")
        assert sorted(_evicted(gw)) == ["a", "b"]
        causes = {
            e["instance"]: (e["cause"], e["for_model"]) for e in gw.ld.events("gateway.evicted")
        }
        assert sorted(causes.values()) == [("group", "c"), ("max_loaded", "c")]
        assert _gateway_of(gw, "a")["group"] == "pair"
        assert "group pair: a, b" in gw.ld.ctl("status").stdout
        assert _ask(gw, "b").status_code == 200
        wait_for(lambda: gw.state("a") == "running", 30, "a loaded along with b")
        # A client's unload of one (Ollama's keep_alive 0) unloads the group.
        body = {"model": "b", "prompt": "", "keep_alive": 0}
        assert httpx.post(f"{gw.base}/api/generate", json=body, timeout=30).status_code == 200
        _idle(gw, "a", "b")


def _keys(d: Path) -> dict[str, str]:
    for name in ("main", "alice"):
        (d / f"{name}.key").write_text(f"{name}-secret-0123456789\n")
        (d / f"{name}.key").chmod(0o600)
    return {"Authorization": "Bearer main-secret-0123456789"}


def test_a_name_chooses_what_is_loaded(tiny_model: Path, tmp_path: Path) -> None:
    main = _keys(tmp_path)
    alice = {"Authorization": "Bearer alice-secret-0123456789"}
    keys = {"alice": {"key_file": str(tmp_path / "alice.key"), "models": ["chat"]}}
    with gateway(
        tiny_model,
        {"a": LAZY, "b": LAZY},
        max_loaded=1,
        names={"chat": {"models": ["a", "b"]}},
        api_key_file=str(tmp_path / "main.key"),
        keys=keys,
    ) as gw:
        first = _ask(gw, "chat", main)
        assert first.status_code == 200
        assert first.json()["model"] == "chat"  # the name asked for, not a's
        assert (gw.state("a"), gw.state("b")) == ("running", "stopped")
        assert _ask(gw, "b", main).status_code == 200  # a is evicted for b
        # b is loaded now: chat goes there, loading and evicting nothing.
        assert _ask(gw, "chat", alice).json()["model"] == "chat"
        assert gw.starts("a") == 1
        assert _evicted(gw) == ["a"]
        names = gw.ld.status()["gateway"]["names"]
        assert names == {"chat": {"models": ["a", "b"], "now": "b"}}
        assert "name chat: a, b -> now b" in gw.ld.ctl("status").stdout
        page = httpx.get(f"{gw.base}/ui/api/status", headers=main, timeout=5).json()
        assert page["gateway"]["names"]["chat"]["now"] == "b"
        assert [m["id"] for m in page["models"]] == ["a", "b"]  # the name is no row
        # Listed, and a key scoped to the name sees and uses it alone.
        listed = httpx.get(f"{gw.base}/v1/models", headers=main, timeout=5).json()["data"]
        assert {m["id"] for m in listed} >= {"a", "b", "chat"}
        tags = httpx.get(f"{gw.base}/api/tags", headers=alice, timeout=5).json()["models"]
        assert [m["name"] for m in tags] == ["chat:latest"]
        assert _ask(gw, "a", alice).status_code == 404
