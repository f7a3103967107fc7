"""The gateway on the wire, against the real daemon and the real llama-server.

Requests of every kind (a completion, a GET, an unknown model, a body that is not JSON)
share one kept-alive connection, also pipelined, and every answer arrives whole and in
order, each booked once; a request asking to close gets its answer, then the close; a
client that half-closes after its POST is taken as leaving, as one that closes is; a
client that leaves frees the instance's slot and is booked 499 before the answer's head,
the head's status after.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from gateway_helpers import LONG, TINY, Gw, gateway
from helpers import wait_for
from wire_helpers import Conn, get, post

pytestmark = pytest.mark.timeout(90)


@contextmanager
def wired(tiny_model: Path, **instance: Any) -> Iterator[tuple[Gw, int]]:
    with gateway(tiny_model, {"tiny": {**TINY, **instance}}) as gw:
        yield gw, int(gw.base.rsplit(":", 1)[1])


def completion(tokens: int) -> dict[str, Any]:
    return {"model": "tiny", "prompt": "hi", "max_tokens": tokens, "ignore_eos": True}


def activity(gw: Gw) -> list[dict[str, Any]]:
    """Newest first."""
    return list(httpx.get(f"{gw.base}/v1/activity", timeout=5).json()["data"])


def in_flight(gw: Gw) -> int:
    return int(gw.ld.instance("tiny")["gateway"]["in_flight"])


def test_every_kind_of_request_shares_one_kept_alive_connection(tiny_model: Path) -> None:
    with wired(tiny_model) as (gw, port), Conn(port) as conn:
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
        statuses = [r["status"] for r in activity(gw)]
        assert statuses == [200, 400, 404, 200], "each request booked once, as answered"
        assert in_flight(gw) == 0


def test_pipelined_requests_are_answered_in_order(tiny_model: Path) -> None:
    unknown = {**completion(2), "model": "nope"}
    with wired(tiny_model) as (gw, port), Conn(port) as conn:
        conn.send(
            post(port, "/v1/completions", completion(4))
            + post(port, "/v1/completions", unknown)
            + post(port, "/v1/completions", completion(1))
            + get(port, "/health")
        )
        replies = [conn.reply() for _ in range(4)]
        assert [r.status for r in replies] == [200, 404, 200, 200]
        assert replies[0].json()["usage"]["completion_tokens"] == 4
        assert replies[1].json()["error"]["code"] == "model_not_found"
        assert replies[2].json()["usage"]["completion_tokens"] == 1
        assert replies[3].json() == {"status": "ok"}
        wait_for(lambda: in_flight(gw) == 0, 5, "nothing in flight")


def test_a_request_asking_to_close_gets_its_answer_then_the_close(tiny_model: Path) -> None:
    with wired(tiny_model) as (_, port), Conn(port) as conn:
        conn.send(post(port, "/v1/completions", completion(2), "Connection: close"))
        reply = conn.reply()
        assert reply.status == 200
        assert reply.headers["connection"] == "close"
        assert conn.sock.recv(1) == b"", "the connection stayed open"


def test_a_post_then_a_half_close_is_the_client_leaving(tiny_model: Path) -> None:
    """The EOF after a whole request is the client leaving, as uvicorn and nginx (for a
    proxied request) take it: its request is cancelled, booked 499, and its slot freed."""
    body = {**completion(400), "logprobs": 256}  # seconds of generation
    with wired(tiny_model, **LONG) as (gw, port), Conn(port) as conn:
        seen = len(activity(gw))
        conn.send(post(port, "/v1/completions", body))
        conn.half_close()
        assert conn.sock.recv(1) == b"", "an answer, or the connection stayed open"
        wait_for(lambda: len(activity(gw)) > seen, 10, "the request booked")
        wait_for(lambda: in_flight(gw) == 0, 10, "its slot freed")
        assert activity(gw)[0]["status"] == 499


@pytest.mark.parametrize(
    ("stream", "status"), [(True, 200), (False, 499)], ids=["mid-stream", "before-the-head"]
)
def test_a_client_that_leaves_frees_its_slot_and_is_booked(
    tiny_model: Path, stream: bool, status: int
) -> None:
    # Hundreds of tokens with every probability: seconds of generation on any machine.
    body = {**completion(400), "logprobs": 256, "stream": stream}
    with wired(tiny_model, **LONG) as (gw, port):
        seen = len(activity(gw))
        with Conn(port) as conn:
            conn.send(post(port, "/v1/completions", body))
            if stream:
                got, _, _ = conn.head()
                assert got == 200
                assert conn.chunk()  # tokens are flowing
            wait_for(lambda: in_flight(gw) == 1, 10, "the request in flight")
        wait_for(lambda: len(activity(gw)) > seen, 10, "the request booked")
        wait_for(lambda: in_flight(gw) == 0, 10, "its slot freed")
        assert activity(gw)[0]["status"] == status
