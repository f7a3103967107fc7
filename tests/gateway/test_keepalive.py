"""Keep-alive bytes for a streamed request waiting on its model's load: SSE comments for
OpenAI's routes, empty chunks for Ollama's, and a load that fails after the stream began
ends it with an error event in the family's shape. The fake llama-server loads slowly."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import ollama
import openai
import pytest
from gateway_helpers import TINY, chat, fake_gateway

from llamad.gateway.ollama.answer import chat_renderer, generate_renderer, keepalive_beat
from llamad.gateway.relay.keepalive import KeepAlive, ndjson_beat, sse_beat

pytestmark = pytest.mark.timeout(90)

LAZY = {**TINY, "on_demand": True}
INTERVAL = 0.2
HI = [{"role": "user", "content": "hi"}]


def _slow(seconds: float, **env: str) -> dict[str, Any]:
    return {**LAZY, "env": {"FAKE_LOAD_SECONDS": str(seconds), **env}}


def _fake(tiny_model: Path, llama_server: Path, instances: dict[str, Any]) -> Any:
    return fake_gateway(tiny_model, llama_server, instances, keepalive_interval=INTERVAL)


def _lines(base: str, path: str, body: dict[str, Any]) -> tuple[int, str, list[str]]:
    with httpx.stream("POST", base + path, json=body, timeout=30) as reply:
        kind = reply.headers["content-type"]
        return reply.status_code, kind, list(reply.iter_lines())


def _last(lines: list[str]) -> str:
    return next(line for line in reversed(lines) if line)


def test_a_stream_waiting_on_a_load_gets_keepalives_and_clients_still_parse(
    tiny_model: Path, llama_server: Path
) -> None:
    models = {n: _slow(1.5) for n in ("raw", "sdk", "nd", "ol")}
    with _fake(tiny_model, llama_server, models) as gw:
        status, kind, lines = _lines(gw.base, "/v1/chat/completions", chat("raw", stream=True))
        assert status == 200
        assert kind.startswith("text/event-stream")
        first_data = next(i for i, line in enumerate(lines) if line.startswith("data:"))
        assert lines[:first_data].count(": keep-alive") >= 2  # 1.5 s of load, 0.2 s apart
        assert ": keep-alive" not in lines[first_data:]
        assert [line for line in lines if line][-1] == "data: [DONE]"

        with openai.OpenAI(base_url=f"{gw.base}/v1", api_key="none", max_retries=0) as client:
            chunks = list(client.chat.completions.create(model="sdk", messages=HI, stream=True))
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "ok"

        status, kind, lines = _lines(gw.base, "/api/chat", {"model": "nd", "messages": HI})
        assert (status, kind) == (200, "application/x-ndjson")
        docs = [json.loads(line) for line in lines]  # every line is JSON: no blank ones
        waiting = [d for d in docs if not d["done"] and d["message"]["content"] == ""]
        assert len(waiting) >= 2
        assert docs[-1]["done"] is True
        assert "".join(d["message"]["content"] for d in docs) == "ok"

        with ollama.Client(host=gw.base) as client:
            parts = list(client.chat(model="ol", messages=HI, stream=True))
        assert len(parts) >= 3  # the keep-alives parse as chunks too
        assert "".join(p.message.content or "" for p in parts) == "ok"
        assert parts[-1].done


def test_a_load_failing_after_the_first_keepalive_ends_the_stream_with_an_error(
    tiny_model: Path, llama_server: Path
) -> None:
    # The fake dies a second into its 30-second load: the load fails well after the
    # stream has begun, so the refusal can only be an error event. A model per client:
    # after a failure, the backoff refuses the next request at once, with a status.
    dies = _slow(30, FAKE_EXIT_AFTER="1")
    models = {f"dies-{n}": dies for n in ("raw", "openai", "ollama", "anthropic")}
    with _fake(tiny_model, llama_server, models) as gw:
        body = chat("dies-raw", stream=True)
        status, _, lines = _lines(gw.base, "/v1/chat/completions", body)
        assert status == 200
        assert ": keep-alive" in lines
        last = json.loads(_last(lines)[len("data: ") :])
        assert last["error"]["code"] == "load_failed"

        with (
            openai.OpenAI(base_url=f"{gw.base}/v1", api_key="none", max_retries=0) as client,
            pytest.raises(openai.APIError, match="failed to load") as failed,
            client.chat.completions.create(model="dies-openai", messages=HI, stream=True) as s,
        ):
            list(s)
        assert not isinstance(failed.value, openai.APIStatusError)  # in the stream

        with (
            ollama.Client(host=gw.base) as ol,
            pytest.raises(ollama.ResponseError, match="failed to load") as refused,
        ):
            list(ol.chat(model="dies-ollama", messages=HI, stream=True))
        assert refused.value.status_code == -1  # read from the stream's last line, not a status

        with (
            anthropic.Anthropic(base_url=gw.base, api_key="none", max_retries=0) as claude,
            pytest.raises(anthropic.APIStatusError, match="failed to load") as error,
            claude.messages.stream(model="dies-anthropic", max_tokens=5, messages=HI) as events,
        ):
            list(events)
        assert error.value.status_code == 200  # the stream had begun: an error event
        assert error.value.body["error"]["type"] == "overloaded_error"


async def test_an_answer_in_time_goes_out_as_it_is_and_an_error_after_beats_is_an_event() -> None:
    sent: list[dict[str, Any]] = []
    beats = asyncio.Event()

    async def send(message: Any) -> None:
        sent.append(message)
        if len(sent) >= 3:
            beats.set()

    quick = KeepAlive(send, 10.0)
    quick.arm(lambda: sse_beat("/v1/chat/completions"))
    await quick.stop()
    await quick.out({"type": "http.response.start", "status": 503, "headers": []})
    assert sent == [{"type": "http.response.start", "status": 503, "headers": []}]

    sent.clear()
    slow = KeepAlive(send, 0.01)
    slow.arm(lambda: sse_beat("/v1/messages"))
    await asyncio.wait_for(beats.wait(), 5)
    await slow.stop()
    assert sent[0]["status"] == 200
    assert sent[1]["body"] == b": keep-alive\n\n"
    await slow.out({"type": "http.response.start", "status": 503, "headers": []})
    await slow.out({"type": "http.response.body", "body": b'{"type": "error"}'})
    assert sent[-1] == {
        "type": "http.response.body",
        "body": b'event: error\ndata: {"type": "error"}\n\n',
        "more_body": False,
    }
    assert [m["type"] for m in sent].count("http.response.start") == 1


def test_ollama_errors_stay_one_line() -> None:
    beat = ndjson_beat(lambda: b"{}\n")
    assert beat.error(b'{\n "error": "x"\n}') == b'{  "error": "x" }\n'
    assert beat.content_type == b"application/x-ndjson"


def test_ollama_keepalives_are_empty_chunks_of_the_routes_shape() -> None:
    chat_beat = keepalive_beat(chat_renderer)({"model": "m", "messages": []})
    generate_beat = keepalive_beat(generate_renderer)({"model": "m", "prompt": "p"})
    assert chat_beat is not None
    assert generate_beat is not None
    chunk = json.loads(chat_beat.line())
    assert (chunk["model"], chunk["message"], chunk["done"]) == (
        "m", {"role": "assistant", "content": ""}, False,
    )  # fmt: skip
    chunk = json.loads(generate_beat.line())
    assert (chunk["model"], chunk["response"], chunk["done"]) == ("m", "", False)
    assert generate_beat.line().endswith(b"}\n")
    # An answer that does not stream has nothing to keep alive.
    assert keepalive_beat(chat_renderer)({"model": "m", "stream": False}) is None
    assert keepalive_beat(chat_renderer)(None) is None
