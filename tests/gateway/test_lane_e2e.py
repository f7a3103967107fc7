"""The gateway's lane against the real daemon and the real llama-server.

Requests the lane serves and requests it gives back to the app (an unknown model, a body
that is not JSON, a GET, a browser's Origin) share one kept-alive connection, also
pipelined, and every answer arrives whole and in order. A stream through the lane is
valid SSE, and leaves the same activity record and the same Prometheus counts as the
same request through the app. A client that leaves frees the instance's slot, and is
booked as the app books it: 499 before the answer's head, the head's status after.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_helpers import LONG, TINY, Gw, chat, gateway
from helpers import wait_for
from lane_helpers import Conn, get, post

from llamad.client.http import Client

pytestmark = pytest.mark.timeout(90)

ORIGIN = "http://app.example"  # allowed: its requests go through the app (CORS)
# Fields of a record that say what happened, not how long it took.
SAME = ("model", "instance", "host", "route", "status", "client", "key", "peer")


@contextmanager
def lane_gateway(tiny_model: Path, **instance: Any) -> Iterator[tuple[Gw, int]]:
    with gateway(tiny_model, {"tiny": {**TINY, **instance}}, allowed_origins=[ORIGIN]) as gw:
        yield gw, int(gw.base.rsplit(":", 1)[1])


def completion(tokens: int) -> dict[str, Any]:
    return {"model": "tiny", "prompt": "hi", "max_tokens": tokens, "ignore_eos": True}


def activity(gw: Gw) -> list[dict[str, Any]]:
    """Newest first."""
    return list(httpx.get(f"{gw.base}/v1/activity", timeout=5).json()["data"])


def in_flight(gw: Gw) -> int:
    return int(gw.ld.instance("tiny")["gateway"]["in_flight"])


def counts(gw: Gw) -> dict[str, float]:
    """Every counter and histogram count of model "tiny", by series."""
    with Client(gw.ld.socket).stream("/metrics", timeout=5) as chunks:
        text = b"".join(chunks).decode()
    out = {}
    for line in text.splitlines():
        series, _, value = line.rpartition(" ")
        name = series.split("{")[0]
        if 'model="tiny"' in series and name.endswith(("_total", "_count")):
            out[series] = float(value)
    return out


def grew(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {k: v - before.get(k, 0.0) for k, v in after.items() if v != before.get(k, 0.0)}


def test_lane_and_app_answers_share_one_kept_alive_connection(tiny_model: Path) -> None:
    with lane_gateway(tiny_model) as (gw, port), Conn(port) as conn:
        conn.send(post(port, "/v1/completions", completion(2)))
        first = conn.reply()
        conn.send(get(port, "/v1/models"))
        models = conn.reply()
        conn.send(post(port, "/v1/completions", {**completion(2), "model": "nope"}))
        unknown = conn.reply()
        conn.send(post(port, "/v1/completions", b"{not json"))
        bad = conn.reply()
        conn.send(post(port, "/v1/completions", completion(3)))
        last = conn.reply()
        assert first.status == 200, first.body
        assert first.json()["usage"]["completion_tokens"] == 2
        assert models.status == 200
        assert "tiny" in [m["id"] for m in models.json()["data"]]
        assert unknown.status == 404
        assert unknown.json()["error"]["code"] == "model_not_found"
        assert bad.status == 400
        assert bad.json()["error"]["type"] == "invalid_request_error"
        assert last.status == 200, last.body
        assert last.json()["usage"]["completion_tokens"] == 3
        for reply in (first, models, unknown, bad, last):
            assert reply.headers.get("connection") != "close"
        assert [r.laned for r in (first, models, unknown, bad, last)] == [
            True, False, False, False, True,
        ]  # fmt: skip
        statuses = [r["status"] for r in activity(gw)]
        assert statuses == [200, 400, 404, 200], "each request booked once, as answered"
        assert in_flight(gw) == 0


def test_two_pipelined_completions_are_answered_in_order(tiny_model: Path) -> None:
    with lane_gateway(tiny_model) as (gw, port), Conn(port) as conn:
        conn.send(
            post(port, "/v1/completions", completion(4))
            + post(port, "/v1/completions", completion(1))
        )
        first, second = conn.reply(), conn.reply()
        assert (first.status, second.status) == (200, 200), (first.body, second.body)
        assert first.json()["usage"]["completion_tokens"] == 4
        assert second.json()["usage"]["completion_tokens"] == 1
        for reply in (first, second):
            assert reply.json()["choices"][0]["text"]
        assert first.laned, "the first of a pipelined pair is the lane's"
        conn.send(get(port, "/health"))  # the connection still serves
        assert conn.reply().status == 200
        wait_for(lambda: in_flight(gw) == 0, 5, "nothing in flight")


def test_a_request_given_back_to_the_app_keeps_its_place_in_a_pipeline(tiny_model: Path) -> None:
    unknown = {**completion(2), "model": "nope"}
    with lane_gateway(tiny_model) as (gw, port), Conn(port) as conn:
        conn.send(
            post(port, "/v1/completions", unknown)
            + post(port, "/v1/completions", completion(2))
            + get(port, "/health")
        )
        replies = [conn.reply() for _ in range(3)]
        assert [r.status for r in replies] == [404, 200, 200]
        assert replies[0].json()["error"]["code"] == "model_not_found"
        assert replies[1].json()["usage"]["completion_tokens"] == 2
        assert replies[2].json() == {"status": "ok"}
        wait_for(lambda: in_flight(gw) == 0, 5, "nothing in flight")


def test_a_lane_request_asking_to_close_gets_its_answer_then_the_close(tiny_model: Path) -> None:
    with lane_gateway(tiny_model) as (_, port), Conn(port) as conn:
        conn.send(post(port, "/v1/completions", completion(2), "Connection: close"))
        reply = conn.reply()
        assert reply.status == 200
        assert reply.laned
        assert reply.headers["connection"] == "close"
        assert conn.sock.recv(1) == b"", "the connection stayed open"


def test_a_stream_through_the_lane_is_booked_as_the_app_books_it(tiny_model: Path) -> None:
    body = {**chat("tiny", 5, stream=True), "stream_options": {"include_usage": True}}
    with lane_gateway(tiny_model) as (gw, port), Conn(port) as conn:
        before = counts(gw)
        conn.send(post(port, "/v1/chat/completions", body))
        lane_reply, laned = conn.sse()
        middle = counts(gw)
        conn.send(post(port, "/v1/chat/completions", body, f"Origin: {ORIGIN}"))
        app_reply, app = conn.sse()
        after = counts(gw)
        assert lane_reply.laned
        assert not app_reply.laned
        for events in (laned, app):
            assert events[-1] == "[DONE]"
            chunks = [json.loads(e) for e in events[:-1]]
            text = "".join(
                c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"]
            )
            assert text
            assert chunks[-1]["usage"]["completion_tokens"] == 5
        by_app, by_lane = activity(gw)[:2]  # newest first
        for record in (by_lane, by_app):
            assert record["status"] == 200
            assert record["completion_tokens"] == 5
            assert record["prompt_tokens"] > 0
            assert 0 < record["ttfb_s"] <= record["ttft_s"] <= record["duration_s"]
        assert {k: by_lane[k] for k in SAME} == {k: by_app[k] for k in SAME}
        assert by_lane["prompt_tokens"] == by_app["prompt_tokens"]
        lane_counts = grew(before, middle)
        assert lane_counts == grew(middle, after)
        assert lane_counts['llamad_gateway_requests_total{model="tiny",status="200"}'] == 1


@pytest.mark.parametrize(
    ("stream", "status"), [(True, 200), (False, 499)], ids=["mid-stream", "before-the-head"]
)
def test_a_client_that_leaves_frees_its_slot_and_is_booked_as_the_app_books_it(
    tiny_model: Path, stream: bool, status: int
) -> None:
    # Hundreds of tokens with every probability: seconds of generation on any machine.
    body = {**completion(400), "logprobs": 256, "stream": stream}
    with lane_gateway(tiny_model, **LONG) as (gw, port):
        by_lane = leave(gw, port, body, stream)
        by_app = leave(gw, port, body, stream, f"Origin: {ORIGIN}")
        assert by_lane["status"] == by_app["status"] == status, (by_lane, by_app)
        assert {k: by_lane[k] for k in SAME} == {k: by_app[k] for k in SAME}


def leave(gw: Gw, port: int, body: dict[str, Any], stream: bool, *extra: str) -> dict[str, Any]:
    """Send `body`, leave while it is served, and return its record once booked."""
    seen = len(activity(gw))
    with Conn(port) as conn:
        conn.send(post(port, "/v1/completions", body, *extra))
        if stream:
            got, _, names = conn.head()
            assert got == 200
            laned = any(n != n.lower() for n in names)
            assert laned == (not extra), "not served the way the test meant"
            assert conn.chunk()  # tokens are flowing
        wait_for(lambda: in_flight(gw) == 1, 10, "the request in flight")
    wait_for(lambda: len(activity(gw)) > seen, 10, "the request booked")
    wait_for(lambda: in_flight(gw) == 0, 10, "its slot freed")
    return activity(gw)[0]
