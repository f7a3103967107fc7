"""Eviction by LRU under max_loaded, busy models kept, and clients that leave."""

from __future__ import annotations

import contextlib
import json
import threading
from pathlib import Path
from typing import Any

import httpx
from gateway_helpers import LONG, TINY, Gw, chat, gateway
from helpers import wait_for

LAZY = {**TINY, "on_demand": True}
LAZY_LONG = {**LONG, "on_demand": True}


def _ask(gw: Gw, model: str) -> int:
    url = f"{gw.base}/v1/chat/completions"
    return httpx.post(url, json=chat(model), timeout=30).status_code


def _evicted(gw: Gw) -> list[str]:
    return [e["instance"] for e in gw.ld.events("gateway.evicted")]


def test_lru_eviction_order(tiny_model: Path) -> None:
    models = {"a": LAZY, "b": LAZY, "c": LAZY}
    with gateway(tiny_model, models, max_loaded=2) as gw:
        assert [_ask(gw, m) for m in ("a", "b", "a")] == [200, 200, 200]
        assert _ask(gw, "c") == 200  # b is the least recently used
        assert _evicted(gw) == ["b"]
        wait_for(lambda: gw.state("b") == "idle", 10, "b idle")
        assert _ask(gw, "b") == 200  # now a is
        assert _evicted(gw) == ["b", "a"]
        assert (gw.state("a"), gw.state("c")) == ("idle", "running")


class _Stream(threading.Thread):
    """A streaming completion read to its end (or until `stop` is set)."""

    def __init__(self, gw: Gw, model: str, tokens: int) -> None:
        super().__init__(daemon=True)
        self.url, self.model, self.tokens = f"{gw.base}/completion", model, tokens
        self.started = threading.Event()
        self.stop = threading.Event()
        self.final: dict[str, Any] = {}

    def run(self) -> None:
        body = {"model": self.model, "prompt": "hi", "n_predict": self.tokens, "stream": True}
        body["ignore_eos"] = True
        with httpx.stream("POST", self.url, json=body, timeout=60) as resp:
            for line in resp.iter_lines():
                self.started.set()
                if self.stop.is_set():
                    return
                if line.startswith("data: "):
                    self.final = json.loads(line[6:])


def test_a_busy_model_is_not_evicted(tiny_model: Path) -> None:
    with gateway(tiny_model, {"a": LAZY_LONG, "b": LAZY}, max_loaded=1) as gw:
        stream = _Stream(gw, "a", 120)
        stream.start()
        assert stream.started.wait(30)
        # b waits for room: a streams on untouched, then goes, then b is served.
        assert _ask(gw, "b") == 200
        stream.join(30)
        assert stream.final.get("stop") is True
        assert stream.final.get("tokens_predicted") == 120
        assert _evicted(gw) == ["a"]
        evicted = gw.ld.events("gateway.evicted")[0]["timestamp"]
        served = gw.ld.events("gateway.loaded", model="a")[0]["timestamp"]
        assert served < evicted


def test_a_load_nobody_waits_for_is_cancelled_before_it_evicts(tiny_model: Path) -> None:
    with gateway(tiny_model, {"a": LAZY_LONG, "b": LAZY}, max_loaded=1) as gw:
        stream = _Stream(gw, "a", 100_000)
        stream.start()
        assert stream.started.wait(30)
        with contextlib.suppress(httpx.ReadTimeout):  # the client gives up waiting for room
            httpx.post(f"{gw.base}/v1/chat/completions", json=chat("b"), timeout=1.0)
        gw.ld.wait_event("gateway.load_cancelled", model="b")
        assert gw.state("b") == "stopped"
        assert gw.state("a") == "running"
        assert _evicted(gw) == []
        stream.stop.set()
        stream.join(10)


def test_disconnect_mid_stream_stops_generation(tiny_model: Path) -> None:
    with gateway(tiny_model, {"a": LONG}) as gw:
        port = gw.ld.instance("a")["port"]
        stream = _Stream(gw, "a", 100_000)
        stream.start()
        assert stream.started.wait(30)

        def processing() -> bool:
            slots = httpx.get(f"http://127.0.0.1:{port}/slots", timeout=5).json()
            return any(s["is_processing"] for s in slots)

        assert processing()
        stream.stop.set()  # leaves the with-block: the connection closes
        stream.join(10)
        wait_for(lambda: not processing(), 10, "llama-server to stop generating")
        wait_for(lambda: gw.ld.instance("a")["gateway"]["in_flight"] == 0, 5, "nothing in flight")
