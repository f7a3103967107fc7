"""The fleet routes to a cache only when it pays: the pure rule (a table of wait, rate,
tokens and cached tokens against the replica chosen), the expected wait, and the
balancer that counts a cache only from what a server reported."""

from __future__ import annotations

import pytest

from llamad.gateway.replicas.balancer import Balancer, Waiting
from llamad.gateway.replicas.cache_pays import Option, expected_wait, soonest
from llamad.gateway.replicas.hints import Hints
from llamad.gateway.replicas.replica import LOCAL, Replica

pytestmark = pytest.mark.timeout(10)

HOLDER, FREE = (LOCAL, "r0"), (LOCAL, "r1")

SOONEST = [
    # (holder's wait s, rate tok/s, prompt tokens, holder's cached tokens, chosen)
    (0.0, 1000.0, 2000, 1900, HOLDER),  # the holder is free: its cache wins outright
    (0.0, None, 2000, 1900, HOLDER),  # ...even with no rate measured
    (0.5, 1000.0, 2000, 1900, HOLDER),  # 0.5 s wait + 0.1 s against 2 s cold
    (2.5, 1000.0, 2000, 1900, FREE),  # 2.5 s wait: the cold prefill is sooner
    (0.5, 1000.0, 300, 280, FREE),  # a short conversation: 0.3 s cold beats the wait
    (0.5, 100.0, 300, 280, HOLDER),  # ...but not on a model ten times slower
    (0.5, 1000.0, 2000, 0, FREE),  # nothing reported held: never worth a wait
    (1.9, 1000.0, 2000, 5000, HOLDER),  # a count beyond the prompt holds the prompt alone
    (0.5, None, 2000, 1900, FREE),  # no rate measured: nothing to weigh, balance decides
    (None, 1000.0, 2000, 1900, FREE),  # no request time measured: the wait is unknown
]


@pytest.mark.parametrize(("wait", "rate", "tokens", "cached", "expected"), SOONEST)
def test_the_turn_goes_where_it_is_answered_soonest(
    wait: float | None, rate: float | None, tokens: int, cached: int, expected: object
) -> None:
    options = [Option(FREE, 0.0, 0), Option(HOLDER, wait, cached)]
    if wait == 0.0:  # the balancer offers a free holder first
        options.reverse()
    assert soonest(options, tokens, rate) == expected


def test_nothing_to_choose_from() -> None:
    assert soonest([], 100, 1000.0) is None
    assert soonest([Option(HOLDER, None, 10)], 100, 1000.0) is None


def r(busy: int = 0, slots: int = 1, queued: int = 0, ready: bool = True) -> Replica:
    return Replica(LOCAL, "r0", slots=slots, busy=busy, queued=queued, ready=ready)


WAITS = [
    # (replica, a request's seconds, requests waiting for it at the gateway, expected wait)
    (r(busy=0), None, 0, 0.0),  # a free slot: no wait, measured or not
    (r(busy=1), 0.4, 0, 0.4),  # one ahead on one slot
    (r(busy=1, queued=2), 0.4, 0, 1.2),  # three ahead
    (r(busy=1), 0.4, 2, 1.2),  # ...or two already waiting at the gateway for its cache
    (r(busy=4, slots=4), 0.4, 0, 0.1),  # four slots: one of four frees first
    (r(busy=1), None, 0, None),  # nothing measured: unknown
    (r(busy=0, ready=False), 0.4, 0, None),  # not serving
]


@pytest.mark.parametrize(("replica", "service", "waiting", "expected"), WAITS)
def test_expected_wait(
    replica: Replica, service: float | None, waiting: int, expected: float | None
) -> None:
    assert expected_wait(replica, service, waiting) == pytest.approx(expected)


def _turns(system: str) -> tuple[Hints, Hints]:
    first = [{"role": "system", "content": system}, {"role": "user", "content": "go on"}]
    later = [*first, {"role": "assistant", "content": "so"}, {"role": "user", "content": "and"}]
    return Hints({"messages": first}), Hints({"messages": later})


def _replicas(holder_busy: int) -> list[Replica]:
    return [
        Replica(LOCAL, "r0", slots=1, busy=holder_busy),
        Replica(LOCAL, "r1", slots=1, busy=0, last_pick=0),
    ]


def _measured(balancer: Balancer) -> None:
    """Requests of 0.2 s on their slot, prompts read at 1,000 tokens a second."""
    for _ in range(3):
        balancer.answered("m", Hints(), FREE, 0, 0.2, 0, 500, 500.0)


def test_a_long_turn_waits_for_its_busy_holder_and_a_short_one_goes_to_the_free_replica() -> None:
    balancer = Balancer()
    _measured(balancer)
    long_first, long_next = _turns("x" * 8000)
    short_first, short_next = _turns("y" * 40)
    # r0's server answered both first turns, saying it now holds their prompts.
    balancer.answered("m", long_first, HOLDER, 0, 2.0, 0, 2000, 2000.0)
    balancer.answered("m", short_first, HOLDER, 0, 0.2, 0, 20, 20.0)
    assert balancer.pick("m", _replicas(holder_busy=1), long_next) is None  # waits for r0
    chosen = balancer.pick("m", _replicas(holder_busy=1), short_next)
    assert chosen is not None
    assert chosen.key == FREE
    chosen = balancer.pick("m", _replicas(holder_busy=0), long_next)
    assert chosen is not None
    assert chosen.key == HOLDER
    assert balancer.cached("m", long_next, HOLDER) == 2000
    assert balancer.cached("m", long_next, FREE) == 0


def test_a_holder_whose_server_reuses_nothing_stops_being_waited_for() -> None:
    balancer = Balancer()
    _measured(balancer)
    first, later = _turns("x" * 8000)
    balancer.answered("m", first, HOLDER, 0, 2.0, 0, 2000, 2000.0)
    assert balancer.pick("m", _replicas(holder_busy=1), later) is None
    # Two turns sent there for its cache came back having reused none of it (a hybrid
    # model, or a slot another conversation took): its count falls to a quarter.
    for _ in range(2):
        expected = balancer.cached("m", later, HOLDER)
        balancer.answered("m", later, HOLDER, expected, 2.0, 0, 2000, 2000.0)
    assert balancer.cached("m", later, HOLDER) == 500
    chosen = balancer.pick("m", _replicas(holder_busy=1), later)
    assert chosen is not None
    assert chosen.key == FREE


def test_without_affinity_nothing_waits() -> None:
    balancer = Balancer()
    _measured(balancer)
    first, later = _turns("x" * 8000)
    balancer.answered("m", first, HOLDER, 0, 2.0, 0, 2000, 2000.0)
    off = Hints(later.doc, affinity=False)
    chosen = balancer.pick("m", _replicas(holder_busy=1), off)
    assert chosen is not None
    assert chosen.key == FREE


def test_turns_waiting_for_one_replica_count_ahead_of_the_next() -> None:
    """Two long conversations held by busy r0: the first waits for it (one request
    ahead); the second would be third in line, and goes to the free r1 instead. Once the
    first stops waiting, the second waits too."""
    balancer = Balancer()
    for _ in range(3):  # requests of 1 s on their slot; prompts read at 1,000 tokens/s
        balancer.answered("m", Hints(), FREE, 0, 1.0, 0, 500, 500.0)
    one_first, one_next = _turns("a" * 6000)
    two_first, two_next = _turns("b" * 6000)
    for first in (one_first, two_first):  # about 1,500 tokens each, held by r0
        balancer.answered("m", first, HOLDER, 0, 1.0, 0, 1500, 1500.0)
    one, two = Waiting(), Waiting()
    assert balancer.pick("m", _replicas(holder_busy=1), one_next, one) is None
    assert one.key == HOLDER
    assert balancer.awaiting[HOLDER] == 1
    chosen = balancer.pick("m", _replicas(holder_busy=1), two_next, two)
    assert chosen is not None
    assert chosen.key == FREE  # 2 s behind two requests against 1.5 s cold
    assert two.key is None
    assert balancer.pick("m", _replicas(holder_busy=1), one_next, one) is None  # not itself
    assert balancer.awaiting[HOLDER] == 1
    balancer.unwait(one)
    assert not balancer.awaiting
    assert balancer.pick("m", _replicas(holder_busy=1), two_next, two) is None


def test_a_short_prompt_never_waits_even_where_prefill_is_slow() -> None:
    """At 50 prompt tokens a second a 200-token prefill (4 s) would lose to a 0.2 s wait,
    but a prompt that short is never held back from a free slot: eight short chats
    sharing a template header all queued on one of two replicas before."""
    balancer = Balancer()
    for _ in range(3):
        balancer.answered("m", Hints(), FREE, 0, 0.2, 0, 500, 10_000.0)  # 50 tokens/s
    first, later = _turns("z" * 700)
    balancer.answered("m", first, HOLDER, 0, 0.2, 0, 200, 4_000.0)
    chosen = balancer.pick("m", _replicas(holder_busy=1), later)
    assert chosen is not None
    assert chosen.key == FREE
