"""A conversation's home replica (rendezvous hashing over names) and what names a
conversation (its opening, through the first user turn)."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from llamad.gateway.replicas.affinity import opening_blocks
from llamad.gateway.replicas.balancer import Balancer
from llamad.gateway.replicas.hints import Hints
from llamad.gateway.replicas.home import home, opening
from llamad.gateway.replicas.replica import Replica

pytestmark = pytest.mark.timeout(10)

A, B, C = ("local", "m0"), ("local", "m1"), ("peer", "m")
CONVERSATIONS = [f"conversation {n}".encode() for n in range(300)]

OPENINGS = [
    # (request body, blocks through its first user turn)
    ({"messages": [{"role": "user", "content": "hi"}]}, 1),
    ({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}]}, 2),
    ({"system": "s", "messages": [{"role": "user", "content": "hi"}]}, 2),  # Anthropic
    ({"messages": [{"role": "assistant", "content": "x"}, {"role": "user", "content": "q"}]}, 2),
    ({"messages": [{"role": "assistant", "content": "no user turn"}]}, 0),
    ({"prompt": "a plain prompt"}, 1),
    ({"prompt": ""}, 0),
    ({"input": "embeddings"}, 0),
    ("not a dict", 0),
]


@pytest.mark.parametrize(("body", "blocks"), OPENINGS)
def test_the_opening_is_the_prompt_through_its_first_user_turn(body: object, blocks: int) -> None:
    assert opening_blocks(body) == blocks


def test_every_turn_of_a_conversation_has_the_same_name() -> None:
    turns = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
    first = Hints({"messages": turns}).conversation
    later = [*turns, {"role": "assistant", "content": "yo"}, {"role": "user", "content": "more"}]
    assert first is not None
    assert Hints({"messages": later}).conversation == first
    other = [turns[0], {"role": "user", "content": "hello"}]
    assert Hints({"messages": other}).conversation != first  # same system prompt
    assert Hints({"messages": turns}, affinity=False).conversation is None
    assert opening((), 2) is None


def test_the_home_depends_on_names_not_on_order() -> None:
    for conv in CONVERSATIONS[:50]:
        homes = {home(conv, order) for order in itertools.permutations([A, B, C])}
        assert len(homes) == 1
    assert home(b"x", []) is None


def test_a_replica_that_goes_moves_only_its_own_conversations() -> None:
    before = {conv: home(conv, [A, B, C]) for conv in CONVERSATIONS}
    after = {conv: home(conv, [A, B]) for conv in CONVERSATIONS}
    moved = [conv for conv in CONVERSATIONS if before[conv] != after[conv]]
    assert moved
    assert all(before[conv] == C for conv in moved)
    back = {conv: home(conv, [C, B, A]) for conv in CONVERSATIONS}
    assert back == before  # it came back: every conversation is home again


def test_conversations_spread_over_the_replicas() -> None:
    counts = Counter(home(conv, [A, B, C]) for conv in CONVERSATIONS)
    assert set(counts) == {A, B, C}
    assert min(counts.values()) > len(CONVERSATIONS) / 3 * 0.7, counts


def _replica(key: tuple[str, str], busy: int = 0, ready: bool = True) -> Replica:
    return Replica(host=key[0], instance=key[1], slots=1, busy=busy, ready=ready)


def _key(chosen: Replica | None) -> tuple[str, str] | None:
    return chosen.key if chosen is not None else None


def test_a_new_balancer_sends_a_conversation_home_and_a_failed_replica_keeps_it() -> None:
    body = {"messages": [{"role": "user", "content": "the long agent prompt"}]}
    hints = Hints(body)
    assert hints.conversation is not None
    where = home(hints.conversation, [A, B])
    elsewhere = B if where == A else A
    for _ in range(2):  # a restarted gateway: a new balancer, the same home
        fresh = Balancer()
        chosen = fresh.pick("m", [_replica(A), _replica(B)], hints)
        assert _key(chosen) == where
    # Its home is down (restarting): the turn goes elsewhere. Until that server's answer
    # says it holds the prompt, the next turn goes home; once it has said so, the next
    # turn follows it there (its slot is there now) though the home is back.
    down = [_replica(where, ready=False), _replica(elsewhere)]
    fresh = Balancer()
    chosen = fresh.pick("m", down, hints)
    assert _key(chosen) == elsewhere
    more = Hints({"messages": [*body["messages"], {"role": "user", "content": "more"}]})
    assert _key(fresh.pick("m", [_replica(A), _replica(B)], more)) == where
    fresh.answered("m", hints, elsewhere, 0, 0.2, cached=None, evaluated=None, prompt_ms=None)
    assert _key(fresh.pick("m", [_replica(A), _replica(B)], more)) == where  # it said nothing
    fresh.answered("m", hints, elsewhere, 0, 0.2, cached=0, evaluated=12, prompt_ms=3.0)
    chosen = fresh.pick("m", [_replica(A), _replica(B)], more)
    assert _key(chosen) == elsewhere
    # Without affinity, balance alone decides.
    chosen = Balancer().pick(
        "m", [_replica(where, busy=1), _replica(elsewhere)], Hints(affinity=False)
    )
    assert _key(chosen) == elsewhere
