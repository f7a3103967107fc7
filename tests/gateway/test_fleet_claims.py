"""A fleet peer decides nothing about where requests go: its gateway is reached on the
host whose control API answered, never at an address its status document names; a
client's cookies and keys never reach it; it cannot take a local instance's own name;
and the slots it claims are bounded."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from fleet_helpers import GW_KEY_B, peer_entry, start_a
from helpers import short_dir, wait_for
from peer_stand_in import ELSEWHERE, lying_peer

from llamad.fleet.peer_api import MAX_ANSWER
from llamad.fleet.table import Peer
from llamad.gateway.fleet.models import FleetModels
from llamad.gateway.fleet.peer_models import MAX_SLOTS, models_of

# A daemon and its llama-server on a busy 2-core machine.
pytestmark = pytest.mark.timeout(150)

HI = [{"role": "user", "content": "hi"}]


def test_a_lying_peer_gets_no_other_address_no_local_name_and_no_cookie(tiny_model: Path) -> None:
    with lying_peer({"peermodel": 1, "both": 100_000}) as liar:
        a = start_a(tiny_model, {}, [peer_entry("liar", liar.control, short_dir())])
        try:
            wait_for(lambda: "peermodel" in a.models(), 15, "A learning the peer's models")
            # `both` is A's own instance: the peer's claim of it adds no replica.
            assert a.models()["both"]["llamad"]["replicas"] == ["local"]
            client = {"Cookie": "session=SECRET", "Authorization": "Bearer mine", "x-api-key": "k"}
            body = {"model": "peermodel", "messages": HI, "max_tokens": 2}
            reply = httpx.post(f"{a.gateway}/v1/chat/completions", json=body, headers=client)
            assert reply.status_code == 200, reply.text
            assert reply.json()["choices"][0]["message"]["content"] == "from the peer"
            assert ELSEWHERE not in liar.got  # the address the peer named: never used
            [seen] = liar.got["127.0.0.1"]
            assert seen["authorization"] == f"Bearer {GW_KEY_B}"  # the peer's key, not ours
            assert "cookie" not in seen
            assert "x-api-key" not in seen
            for _ in range(10):  # 100,000 slots claimed: every request stays local
                body = {"model": "both", "messages": HI, "max_tokens": 2}
                local = httpx.post(f"{a.gateway}/v1/chat/completions", json=body, timeout=60)
                assert local.status_code == 200, local.text
            assert sum(map(len, liar.got.values())) == 1
            served = httpx.get(f"{a.gateway}/v1/activity?model=both", timeout=5).json()["data"]
            assert [r["host"] for r in served] == [None] * 10
            assert a.ld.stop() == 0
        finally:
            a.ld.close()


def test_a_peers_claimed_slots_are_bounded() -> None:
    doc = [
        {"name": "x", "state": "running", "gateway": {"routable": True, "slots": 10**9}},
        *(
            {"name": f"s{i}", "state": "running", "gateway": {"routable": True, "slots": 60}}
            for i in range(3)
        ),
    ]
    for item in doc[1:]:
        item["gateway"]["aliases"] = ["shared"]  # type: ignore[index]
    models = models_of(doc, "-")
    assert models["x"].slots == MAX_SLOTS
    assert models["shared"].slots == MAX_SLOTS  # instances sharing an alias, summed, too


async def test_a_status_document_past_its_bound_marks_the_peer_away() -> None:
    with lying_peer({"peermodel": 1}, padding=MAX_ANSWER * 4) as liar:
        peer = Peer("liar", liar.control)

        async def peers() -> dict[str, Peer]:
            return {"liar": peer}

        fleet = FleetModels(peers, lambda _name: False)
        await fleet.refresh()
        assert f"its answer is larger than {MAX_ANSWER} bytes" in (fleet.seen["liar"].error or "")
        assert fleet.models() == []
