"""Translation without a server: keep_alive durations, request plans, stream readers."""

from __future__ import annotations

import asyncio
import shutil
import threading
from pathlib import Path
from typing import Any

import pytest
from ollama_double import View

from llamad.gateway.ollama import metadata
from llamad.gateway.ollama.durations import done_fields, parse_keep_alive
from llamad.gateway.ollama.errors import OllamaError
from llamad.gateway.ollama.requests import chat_plan, generate_plan, openai_message
from llamad.gateway.ollama.stream import ChatEvents, CompletionEvents


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        (None, None),
        (0, 0.0),
        ("0", 0.0),
        (1800, 1800.0),
        ("5m", 300.0),
        ("1h30m", 5400.0),
        ("1.5h", 5400.0),
        ("300ms", 0.3),
        ("-1", -1.0),
        (-1, -1.0),
        ("-5m", -1.0),
    ],
)
def test_keep_alive(value: object, seconds: float | None) -> None:
    assert parse_keep_alive(value) == seconds


@pytest.mark.parametrize("value", ["5 minutes", "m", "", True, [1], "1x", "inf", "nan"])
def test_bad_keep_alive_is_400(value: object) -> None:
    with pytest.raises(OllamaError) as err:
        parse_keep_alive(value)
    assert err.value.status == 400


def test_done_fields_map_llama_server_timings() -> None:
    timings = {
        "cache_n": 2,
        "prompt_n": 8,
        "prompt_ms": 12.5,
        "predicted_n": 4,
        "predicted_ms": 3.0,
    }
    out = done_fields(
        reason="stop", timings=timings, usage=None, total_seconds=0.5, load_seconds=0.25
    )
    assert out == {
        "done_reason": "stop",
        "total_duration": 500_000_000,
        "load_duration": 250_000_000,
        "prompt_eval_count": 10,
        "prompt_eval_duration": 12_500_000,
        "eval_count": 4,
        "eval_duration": 3_000_000,
    }


def test_chat_message_with_images_and_tool_calls() -> None:
    png = "iVBORw0KGgo="
    msg = openai_message({"role": "user", "content": "what is it?", "images": [png]})
    assert msg["content"] == [
        {"type": "text", "text": "what is it?"},
        {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{png}"}},
    ]
    call = {"function": {"name": "weather", "arguments": {"city": "Oslo"}}}
    msg = openai_message({"role": "assistant", "content": "", "tool_calls": [call]})
    assert msg["tool_calls"] == [
        {
            "id": "call_0",
            "type": "function",
            "function": {"name": "weather", "arguments": '{"city": "Oslo"}'},
        }
    ]
    tool = openai_message({"role": "tool", "content": "12C", "tool_name": "weather"})
    assert tool == {"role": "tool", "content": "12C", "name": "weather"}


def test_chat_plan_maps_options_format_think_and_tools() -> None:
    body = {
        "options": {"temperature": 0.1, "num_predict": 7, "num_ctx": 8192, "stop": ["\n"]},
        "format": {"type": "object"},
        "think": True,
        "tools": [{"type": "function", "function": {"name": "f"}}],
    }
    plan = chat_plan(body, "m", [{"role": "user", "content": "hi"}])
    assert plan.path == "/v1/chat/completions"
    up = plan.body
    assert (up["temperature"], up["max_tokens"], up["stop"]) == (0.1, 7, ["\n"])
    assert "num_ctx" not in up  # the instance's config owns the context size
    assert up["response_format"]["json_schema"]["schema"] == {"type": "object"}
    assert up["chat_template_kwargs"] == {"enable_thinking": True}
    assert up["tools"] == body["tools"]
    assert up["stream"] is True


def test_generate_plans_pick_the_endpoint() -> None:
    assert generate_plan({}, "m", "hi").path == "/v1/chat/completions"
    raw = generate_plan({"raw": True, "options": {"num_predict": 3}}, "m", "hi")
    assert (raw.path, raw.body["prompt"], raw.body["n_predict"]) == ("/completion", "hi", 3)
    fim = generate_plan({"suffix": "end", "format": "json"}, "m", "start")
    assert fim.path == "/infill"
    assert (fim.body["input_prefix"], fim.body["input_suffix"]) == ("start", "end")
    assert fim.body["json_schema"] == {"type": "object"}
    system = generate_plan({"system": "be brief"}, "m", "hi").body["messages"]
    assert system[0] == {"role": "system", "content": "be brief"}


def test_chat_events_join_streamed_tool_call_fragments() -> None:
    events = ChatEvents()
    fragments = ['{"ci', 'ty": "Oslo"}']
    first = {"index": 0, "id": "c", "function": {"name": "weather", "arguments": fragments[0]}}
    rest = {"index": 0, "function": {"arguments": fragments[1]}}
    for call in (first, rest):
        piece = events.feed({"choices": [{"delta": {"tool_calls": [call]}}]})
        assert not piece
    events.feed({"choices": [{"delta": {}, "finish_reason": "tool_calls"}]})
    events.feed({"choices": [], "timings": {"predicted_n": 9}, "usage": {"prompt_tokens": 3}})
    tail = events.finish()
    assert tail.tool_calls == [
        {"function": {"index": 0, "name": "weather", "arguments": {"city": "Oslo"}}}
    ]
    assert events.reason == "stop"
    assert events.timings == {"predicted_n": 9}


def test_chat_events_carry_thinking_and_completion_events_the_stop_type() -> None:
    piece = ChatEvents().feed({"choices": [{"delta": {"reasoning_content": "hmm", "content": ""}}]})
    assert piece.thinking == "hmm"
    events = CompletionEvents()
    assert events.feed({"content": "ab", "stop": False}).content == "ab"
    events.feed({"content": "", "stop": True, "stop_type": "limit", "tokens_evaluated": 5})
    assert events.reason == "length"
    assert events.usage == {"prompt_tokens": 5}


async def test_a_listing_does_not_wait_past_its_budget(
    tmp_path: Path, tiny_model: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = Path(shutil.copy(tiny_model, tmp_path / "fresh.gguf"))  # not in the cache yet
    view = View("fresh", (), model, "running", True, False, 0.0, None, None, None, False)
    # A slow disk, held until the listing has answered: a 0.5 MB read on a quiet machine
    # could otherwise finish inside the zero budget.
    release = threading.Event()
    read = metadata.read_gguf_meta

    def slow_read(path: Path) -> Any:
        release.wait(10)
        return read(path)

    monkeypatch.setattr(metadata, "read_gguf_meta", slow_read)
    assert await metadata.headers([view], budget=0) == [None]
    entry = metadata.tag_entry(view, None)
    assert entry["details"]["family"] == "unknown"
    release.set()
    # The read went on in the background and fills the cache; the digest never changed.
    await asyncio.gather(*metadata._pending)
    (meta,) = await metadata.headers([view], budget=0)
    assert meta is not None
    assert metadata.tag_entry(view, meta)["digest"] == entry["digest"]
    assert metadata.tag_entry(view, meta)["details"]["family"] == "llama"
