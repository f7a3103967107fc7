"""Claude Code's billing block (`cch` changes on every request) reaches the upstream
the same on every request, on each route the gateway takes Anthropic requests on: a
table of bodies, and the whole app in process over a recording upstream."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Any

import pytest
from door_helpers import ask
from pool_helpers import read_request, upstream
from supervisor_double import Double, spec

from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.access.door import Door
from llamad.gateway.app import build_app
from llamad.gateway.core import Gateway
from llamad.gateway.relay.billing_header import stabilise
from llamad.gateway.replicas.affinity import prefix_hashes
from llamad.lifecycle.states import State
from llamad.upstream.pool import Pool

pytestmark = pytest.mark.timeout(20)


def billing(cch: str) -> str:
    return f"x-anthropic-billing-header: cc_version=2.1.42.834; cc_entrypoint=cli; cch={cch};"


def blocks(cch: str) -> dict[str, Any]:
    """Claude Code's shape: the billing block first, the real system prompt after."""
    system = [{"type": "text", "text": billing(cch)}, {"type": "text", "text": "Be terse."}]
    return {"model": "a", "max_tokens": 1, "system": system, "messages": []}


@pytest.mark.parametrize(
    ("path", "doc"),
    [
        ("/v1/messages", blocks("65abc")),
        ("/v1/messages/count_tokens", blocks("65abc")),
        ("/v1/messages", {"system": billing("0a1b2") + "\nBe terse.", "messages": []}),
        # Claude Code's own spacing: the system prompt right after the header's `;`.
        ("/v1/messages", {"system": billing("0a1b2") + "Be terse.", "messages": []}),
        (
            "/v1/messages",
            {"system": [{"type": "text", "text": "Be terse."}, {"text": billing("0a1b2")}]},
        ),
    ],
)
def test_cch_becomes_a_constant(path: str, doc: dict[str, Any]) -> None:
    sent = stabilise(path, json.dumps(doc).encode())
    assert b"cch=fffff;" in sent
    assert b"65abc" not in sent
    assert b"0a1b2" not in sent
    assert b"Be terse." in sent


@pytest.mark.parametrize(
    ("path", "doc"),
    [
        ("/v1/chat/completions", blocks("65abc")),  # not an Anthropic route
        # The header anywhere but at the start of the first block is the user's text.
        ("/v1/messages", {"system": "Quote: " + billing("65abc"), "messages": []}),
        ("/v1/messages", {"messages": [{"role": "user", "content": billing("65abc")}]}),
    ],
)
def test_other_bodies_go_through_untouched(path: str, doc: dict[str, Any]) -> None:
    body = json.dumps(doc).encode()
    assert stabilise(path, body) is body
    assert stabilise("/v1/messages", b"{not json x-anthropic-billing-header:") == (
        b"{not json x-anthropic-billing-header:"
    )


def test_replica_affinity_sees_one_conversation() -> None:
    """Two turns of one Claude Code conversation prefer the replica that served it."""
    turn = [{"role": "user", "content": "hi"}]
    first, second = ({**blocks(cch), "messages": turn} for cch in ("65abc", "1f2e3"))
    assert prefix_hashes(first) == prefix_hashes(second)
    assert first["system"][0]["text"].endswith("cch=65abc;")  # the request is left as sent


@contextlib.asynccontextmanager
async def recording(answer: bytes) -> AsyncIterator[tuple[Door, list[bytes]]]:
    """The app in process over an upstream answering `answer`: it, and the bodies sent."""
    seen: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            seen.append((await read_request(reader)).partition(b"\r\n\r\n")[2])
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n")
            writer.write(b"content-length: %d\r\n\r\n%s" % (len(answer), answer))

    async with upstream(record) as (url, _):
        double = Double()
        double.add(replace(spec("a"), port=int(url.rsplit(":", 1)[1])), State.RUNNING)
        cfg = GatewayConfig(host="127.0.0.1", port=8080, memory_budget=None)
        pool = Pool()
        try:
            yield build_app(Gateway(double, lambda: cfg), pool=pool), seen
        finally:
            await pool.close()


async def test_two_turns_differing_in_cch_reach_the_upstream_alike() -> None:
    async with recording(b'{"type":"message","content":[]}') as (door, seen):
        for path in ("/v1/messages", "/upstream/a/v1/messages", "/v1/messages/count_tokens"):
            for cch in ("65abc", "1f2e3"):
                got = await ask(door, "POST", path, blocks(cch))
                assert got.status == 200, got.body
    assert len(seen) == 6
    assert seen[0] == seen[1] == seen[2] == seen[3]  # /upstream/ sends the same body
    assert seen[4] == seen[5]
    assert b"cch=fffff;" in seen[0]


async def test_a_forced_tool_call_sent_as_chat_keeps_the_block_stable() -> None:
    """A Messages request that forces a tool goes upstream as a chat request (shaping/):
    its system message, built from the billing block, is as stable as on /v1/messages,
    and the system prompt after it is left alone."""
    tool = {"name": "t", "input_schema": {"type": "object"}}
    answer = b'{"choices":[{"index":0,"message":{"role":"assistant","content":"{}"}}]}'
    async with recording(answer) as (door, seen):
        for cch in ("65abc", "1f2e3"):
            doc = {**blocks(cch), "tools": [tool], "tool_choice": {"type": "tool", "name": "t"}}
            await ask(door, "POST", "/v1/messages", doc)
    assert len(seen) == 2
    assert seen[0] == seen[1]
    system = json.loads(seen[0])["messages"][0]
    assert system["role"] == "system"
    assert system["content"] == billing("fffff") + "Be terse."
