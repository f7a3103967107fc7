"""Per-request activity against real llama-servers: /v1/activity, /v1/events, metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_helpers import TINY, chat, event_kinds, follow_events, gateway
from helpers import wait_for

pytestmark = pytest.mark.timeout(60)


def _activity(base: str, query: str = "") -> list[dict[str, Any]]:
    return list(httpx.get(f"{base}/v1/activity{query}", timeout=5).json()["data"])


def _sse_usage(base: str, body: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The usage and timings of a streamed answer's last chunk, read as a client would."""
    usage: dict[str, Any] = {}
    timings: dict[str, Any] = {}
    with httpx.stream("POST", f"{base}/v1/chat/completions", json=body, timeout=10) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                doc = json.loads(line[6:])
                usage = doc.get("usage") or usage
                timings = doc.get("timings") or timings
    return usage, timings


def test_activity_matches_the_usage_llama_server_returned(tiny_model: Path) -> None:
    with gateway(tiny_model, {"tiny": TINY, "other": TINY}) as gw:
        doc = httpx.post(f"{gw.base}/v1/chat/completions", json=chat("tiny", 4), timeout=10).json()
        body = {**chat("tiny", 5, stream=True), "stream_options": {"include_usage": True}}
        usage, timings = _sse_usage(gw.base, body)
        httpx.post(f"{gw.base}/v1/completions", json={"model": "other", "prompt": "a"}, timeout=10)
        records = wait_for(lambda: len(_activity(gw.base)) >= 3 and _activity(gw.base), 5)
        streamed, whole = records[1], records[2]  # newest first
        assert whole["prompt_tokens"] == doc["usage"]["prompt_tokens"]
        assert whole["completion_tokens"] == doc["usage"]["completion_tokens"] == 4
        assert whole["tokens_per_s"] == round(doc["timings"]["predicted_per_second"], 2)
        assert streamed["prompt_tokens"] == usage["prompt_tokens"]
        assert streamed["completion_tokens"] == usage["completion_tokens"] == 5
        assert streamed["tokens_per_s"] == round(timings["predicted_per_second"], 2)
        # The same prompt twice: the stream's was taken from the cache but for its last token.
        for r, t in ((whole, doc["timings"]), (streamed, timings)):
            assert (r["prompt_cached"], r["prompt_evaluated"]) == (t["cache_n"], t["prompt_n"])
        assert streamed["prompt_cached"] > 0
        for r in (streamed, whole):
            assert r["model"] == r["instance"] == "tiny"
            assert r["status"] == 200
            assert r["client"] == "127.0.0.1"
            assert r["key"] is None
            assert r["peer"] is False
            assert 0 < r["ttfb_s"] <= r["ttft_s"] <= r["duration_s"]
            assert "messages" not in json.dumps(r)
            assert "hi" not in r.values()
        assert [r["instance"] for r in _activity(gw.base, "?model=other")] == ["other"]
        text = _metrics(gw)
        assert 'llamad_gateway_tokens_per_second_count{model="tiny"} 2.0' in text
        assert 'llamad_gateway_ttft_seconds_count{model="tiny"} 2.0' in text
        assert 'llamad_gateway_key_tokens_total{key="-",kind="completion",model="tiny"} 9.0' in text
        for source in ("cached", "evaluated"):
            n = float(whole[f"prompt_{source}"] + streamed[f"prompt_{source}"])
            series = f'llamad_gateway_prompt_tokens_total{{model="tiny",source="{source}"}}'
            assert f"{series} {n}" in text


def test_an_anthropic_stream_records_its_prompt_from_its_first_event(tiny_model: Path) -> None:
    body = {
        "model": "tiny",
        "max_tokens": 2,
        "stream": True,
        "messages": [{"role": "user", "content": "hi"}],
    }
    with gateway(tiny_model, {"tiny": TINY}) as gw:
        for _ in range(2):  # the second reads its prompt from the cache
            with httpx.stream("POST", f"{gw.base}/v1/messages", json=body, timeout=10) as r:
                events = [json.loads(x[6:]) for x in r.iter_lines() if x.startswith("data: {")]
        records = wait_for(lambda: len(_activity(gw.base)) >= 2 and _activity(gw.base), 5)
    usage = events[0]["message"]["usage"]
    r = records[0]
    assert (r["prompt_cached"], r["prompt_evaluated"]) == (
        usage["cache_read_input_tokens"], usage["input_tokens"],
    )  # fmt: skip
    assert r["prompt_cached"] > 0
    assert r["completion_tokens"] == 2


def _metrics(gw: Any) -> str:
    from llamad.client.http import Client

    with Client(gw.ld.socket).stream("/metrics", timeout=5) as chunks:
        return b"".join(chunks).decode()


def test_events_stream_loads_states_and_requests(tiny_model: Path) -> None:
    lazy = {**TINY, "on_demand": True}
    # The state is looked at every 0.25 s: it may come after the request.
    done = lambda kinds: {("request", None), ("state", "running")} <= kinds  # noqa: E731
    with gateway(tiny_model, {"lazy": lazy}) as gw:
        with follow_events(gw.base, done) as seen:
            httpx.post(f"{gw.base}/v1/chat/completions", json=chat("lazy", 2), timeout=20)
        kinds = event_kinds(seen)
        assert ("load", "requested") in kinds
        assert ("load", "loaded") in kinds
        assert ("state", "running") in kinds
        request = next(e for e in seen if e["type"] == "request")
        assert request["model"] == "lazy"
        assert request["status"] == 200
        assert request["load_s"] > 0
        assert request["completion_tokens"] == 2


def test_events_stream_evictions_and_idle_stops(tiny_model: Path) -> None:
    lazy = {**TINY, "on_demand": True}
    models = {"first": lazy, "second": {**lazy, "idle_timeout": 1.0}}
    done = lambda kinds: {("stop", "evict"), ("stop", "idle_timeout")} <= kinds  # noqa: E731
    with gateway(tiny_model, models, max_loaded=1) as gw:
        with follow_events(gw.base, done) as seen:
            for name in models:  # the second evicts the first, then idles out
                httpx.post(f"{gw.base}/v1/chat/completions", json=chat(name, 2), timeout=20)
            wait_for(lambda: done(event_kinds(seen)), 15, "an eviction and an idle stop")
        stops = {e["reason"]: e for e in seen if e["type"] == "stop"}
        assert stops["evict"]["model"] == "first"
        assert stops["idle_timeout"]["model"] == "second"
        assert stops["evict"]["size_bytes"] > 0
        # Why, and for which model (issue #51): in the event, the log and the status.
        assert stops["evict"]["cause"] == "max_loaded"
        assert stops["evict"]["for_model"] == "second"
        assert stops["idle_timeout"]["cause"] == "idle_timeout"
        (evicted,) = gw.ld.events("gateway.evicted")
        assert (evicted["cause"], evicted["for_model"]) == ("max_loaded", "second")
        recent = gw.ld.status()["gateway"]["recent_stops"]
        assert [(s["model"], s["cause"]) for s in recent] == [
            ("second", "idle_timeout"),
            ("first", "max_loaded"),
        ]
        shown = gw.ld.ctl("status").stdout
        assert "evicted: max_loaded reached, room for second" in shown, shown
        assert "idle timeout" in shown


def test_ollama_requests_are_recorded(tiny_model: Path) -> None:
    with gateway(tiny_model, {"tiny": TINY}) as gw:
        body = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
        body["options"] = {"num_predict": 3}
        lines = httpx.post(f"{gw.base}/api/chat", json=body, timeout=10).text.splitlines()
        last = json.loads(lines[-1])
        httpx.get(f"{gw.base}/api/tags", timeout=5)  # asks for no model: not recorded
        (r,) = wait_for(lambda: _activity(gw.base), 5)
        assert r["route"] == "/api/chat"
        assert r["model"] == "tiny"
        assert r["status"] == 200
        assert r["completion_tokens"] == last["eval_count"] == 3
        assert r["prompt_tokens"] == last["prompt_eval_count"]
        assert r["ttft_s"] is not None
