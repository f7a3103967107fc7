"""Whether a turn waits for the replica holding its conversation or goes to a free one.

A replica's prompt cache saves the prefill of the tokens it holds, and nothing else: a
turn sent there while it is full waits for a slot, where a free replica would begin at
once and read the whole prompt. The turn goes where it would be answered soonest: the
expected wait for a slot plus the prefill of the tokens that replica does not hold, at
the model's measured prompt rate. A held prefix counts only as far as its server
reported it (`affinity.py`). Without a measured rate or wait nothing can be weighed, and
a free replica wins, as balance alone would choose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from llamad.gateway.replicas.affinity import Key
from llamad.gateway.replicas.replica import Replica


@dataclass(frozen=True)
class Option:
    """One replica the turn could go to."""

    key: Key
    wait_s: float | None  # expected seconds until a slot is free there (None: unknown)
    cached: int  # of the prompt's tokens, those its server reported holding


def soonest(options: Sequence[Option], tokens: int, rate: float | None) -> Key | None:
    """The replica where a prompt of `tokens` tokens is answered first, at `rate` prompt
    tokens a second (None: not measured yet); the earlier option wins a tie."""
    known = [o for o in options if o.wait_s is not None and (rate or o.wait_s == 0)]
    if not known:
        return None
    if not rate:
        return known[0].key  # no rate: those free now alone, in the caller's order

    def finish(o: Option) -> float:
        assert o.wait_s is not None
        return o.wait_s + max(0, tokens - min(o.cached, tokens)) / rate

    return min(known, key=finish).key


def expected_wait(r: Replica, service_s: float | None, waiting: int = 0) -> float | None:
    """Seconds until `r` has a slot for one more request: none while it has one free;
    else the requests ahead (its busy and queued beyond its slots, the `waiting` at the
    gateway for it, and this one) served `r.slots` at a time, each taking `service_s`
    (the model's typical request; None: not measured, so the wait is unknown)."""
    if not r.ready:
        return None
    if r.room > 0:
        return 0.0
    if service_s is None:
        return None
    ahead = r.busy + r.queued + waiting - r.slots + 1
    return ahead * service_s / max(1, r.slots)
