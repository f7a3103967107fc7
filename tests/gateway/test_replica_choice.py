"""The pure rules of replicas: which one a request goes to, and prompt affinity."""

from __future__ import annotations

import pytest

from llamad.gateway.access.hop import affinity_on, relayed_by
from llamad.gateway.replicas.affinity import (
    BLOCK_CHARS,
    Affinity,
    Held,
    prefix_chain,
    prefix_hashes,
)
from llamad.gateway.replicas.hints import Hints
from llamad.gateway.replicas.replica import LOCAL, Replica, choose

pytestmark = pytest.mark.timeout(10)


def r(host: str, busy: int = 0, slots: int = 2, **kw: object) -> Replica:
    return Replica(host=host, instance="m", slots=slots, busy=busy, **kw)  # type: ignore[arg-type]


CASES = [
    # (replicas, preferred host, expected host or None)
    ([r(LOCAL), r("b")], None, LOCAL),  # a tie: local first
    ([r(LOCAL, busy=2), r("b")], None, "b"),  # local full: the free peer
    ([r(LOCAL, busy=1), r("b")], None, "b"),  # the most free slots
    ([r(LOCAL, busy=2), r("b", busy=2)], None, None),  # all full: wait at the gateway
    ([r(LOCAL), r("b", queued=3)], None, LOCAL),  # the least queued work
    ([r(LOCAL), r("b", busy=1)], "b", "b"),  # affinity wins while it has a slot
    ([r(LOCAL), r("b", busy=2)], "b", LOCAL),  # ...not when full and another is free
    ([r(LOCAL, ready=False), r("b", busy=2)], None, None),  # one serves, full: wait
    ([r(LOCAL, ready=False), r("b", ready=False, loading=True)], None, "b"),  # join a load
    ([r("a", ready=False, memory_left=5), r("b", ready=False, memory_left=9)], None, "b"),
    ([r(LOCAL, ready=False), r("b", ready=False, memory_left=9)], None, LOCAL),  # cold: local
    ([r("a", last_pick=2), r("b", last_pick=1)], None, "b"),  # idle peers take turns
    ([r(LOCAL, last_pick=2), r("b", last_pick=1)], None, LOCAL),  # ...after local
    ([r("b", busy=2), r(LOCAL, ready=False, spare=True)], None, LOCAL),  # full: start a spare
    (
        [r("b", busy=2), r(LOCAL, ready=False, spare=True), r("c", ready=False, loading=True)],
        None,
        None,
    ),  # ...one load at a time
    ([r(LOCAL, ready=False, loading=True, queued=1)], None, LOCAL),  # a slot for it
    ([r(LOCAL, ready=False, loading=True, queued=2)], None, None),  # its slots taken: wait
    ([], None, None),
]


@pytest.mark.parametrize(("replicas", "preferred", "expected"), CASES)
def test_choose(replicas: list[Replica], preferred: str | None, expected: str | None) -> None:
    key = (preferred, "m") if preferred else None
    chosen = choose(replicas, key)
    assert (chosen.host if chosen else None) == expected


def chat(*turns: str, system: str = "be brief") -> dict[str, object]:
    messages = [{"role": "system", "content": system}]
    for i, text in enumerate(turns):
        messages.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    return {"model": "m", "messages": messages}


def test_a_chat_is_hashed_per_message_up_to_its_last_user_turn() -> None:
    one = prefix_hashes(chat("hi"))
    two = prefix_hashes(chat("hi", "hello", "how are you?"))
    assert len(one) == 2
    assert len(two) == 4
    assert two[:2] == one  # a chained hash: the next turn extends the previous prefix
    trailing = prefix_hashes(chat("hi", "hello"))  # an assistant turn last: not counted
    assert trailing == one
    # Key order and spacing do not matter; the content does.
    swapped = {
        "messages": [{"content": "be brief", "role": "system"}, {"content": "hi", "role": "user"}]
    }
    assert prefix_hashes(swapped) == one
    assert prefix_hashes(chat("hi", system="other"))[0] != one[0]


def test_a_prompt_is_hashed_in_blocks() -> None:
    text = "x" * (BLOCK_CHARS * 2 + 1)
    assert len(prefix_hashes({"prompt": text})) == 3
    assert prefix_hashes({"prompt": text})[:2] == prefix_hashes({"prompt": text[: BLOCK_CHARS * 2]})
    assert prefix_hashes({"input": "no prompt"}) == ()
    assert prefix_hashes(["not", "a", "dict"]) == ()


def test_the_longest_prefix_decides_and_the_map_is_bounded() -> None:
    table = Affinity(size=4)
    first, longer = prefix_chain(chat("hi")), prefix_chain(chat("hi", "yo", "more"))
    table.reported(first, ("a", "m"), 40)
    table.reported(longer, ("b", "m"), 80)  # b answered the longer one last: it holds both
    assert table.lookup(longer.hashes) == Held(("b", "m"), 80, 4)
    table.reported(first, ("a", "m"), 40)
    assert table.lookup(longer.hashes) == Held(("b", "m"), 80, 4)  # the longest still says b
    assert table.lookup(first.hashes) == Held(("a", "m"), 40, 2)
    table.reported(prefix_chain(chat("other", "x", "y")), ("c", "m"), 9)
    assert len(table._where) == 4  # the oldest prefixes went first


def test_a_prefix_holds_its_share_of_the_reported_tokens_by_characters() -> None:
    table = Affinity(size=100)
    chain = prefix_chain(chat("hi", "yo", "more"))
    table.reported(chain, ("a", "m"), 1000)
    held = table.lookup(chain.hashes[:2])
    assert held is not None
    assert held.blocks == 2
    assert held.tokens == 1000 * chain.ends[1] // chain.ends[-1]


def test_hints_read_the_opt_out_and_the_hop() -> None:
    body = chat("hi")
    assert Hints(body).prefix == prefix_hashes(body)
    assert affinity_on(None)
    assert affinity_on(b"on")
    assert not affinity_on(b" OFF ")
    assert Hints(body, affinity=False).prefix == ()
    assert relayed_by(b"1") == "1"
    assert relayed_by(b" ") == "-"
    assert relayed_by(None) is None
