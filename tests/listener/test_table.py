"""A listener's connections: the cap, one address's share, and who goes to make room."""

from __future__ import annotations

from dataclasses import dataclass, field

from llamad.listener.limits import Limits
from llamad.listener.table import ConnTable


@dataclass(eq=False)
class Conn:
    key: str | None
    idle_since: float | None = 0.0
    evicted: bool = field(default=False)

    def evict(self) -> None:
        self.evicted = True


def table(cap: int) -> tuple[ConnTable, list[tuple[str, str | None]]]:
    said: list[tuple[str, str | None]] = []
    return ConnTable(cap, lambda reason, client: said.append((reason, client))), said


def test_an_address_past_its_share_loses_its_own_longest_idle() -> None:
    t, said = table(8)  # a share of 2
    first, second = Conn("10.0.0.1", 1.0), Conn("10.0.0.1", 2.0)
    assert t.admit(first, Limits(), False)
    assert t.admit(second, Limits(), False)
    third = Conn("10.0.0.1", 3.0)
    assert t.admit(third, Limits(), False)
    assert first.evicted
    assert not second.evicted
    assert said == [("share_evicted_idle", "10.0.0.1")]


def test_an_address_whose_share_is_busy_is_refused_and_others_come_in() -> None:
    t, said = table(8)
    busy = [Conn("10.0.0.1", None) for _ in range(2)]
    assert all(t.admit(c, Limits(), False) for c in busy)
    assert not t.admit(Conn("10.0.0.1"), Limits(), False)
    assert said == [("share", "10.0.0.1")]
    assert t.admit(Conn("10.0.0.2"), Limits(), False)


def test_a_full_cap_closes_the_longest_idle_of_anyone() -> None:
    t, said = table(4)  # a share of 1
    conns = [Conn(f"10.0.0.{n}", float(10 - n)) for n in range(4)]
    assert all(t.admit(c, Limits(), False) for c in conns)
    assert t.admit(Conn("10.0.0.9", None), Limits(), False)
    assert [c.evicted for c in conns] == [False, False, False, True]
    assert said == [("capped_evicted_idle", "10.0.0.3")]
    for c in conns[:3]:
        c.idle_since = None
    assert not t.admit(Conn("10.0.0.8"), Limits(), False)  # every one is serving


def test_trusted_loopback_is_held_to_the_cap_only() -> None:
    t, _ = table(8)
    trusted = Limits(trust_loopback=True)
    conns = [Conn("127.0.0.1", None) for _ in range(8)]
    assert all(t.admit(c, trusted, True) for c in conns)
    assert not t.admit(Conn("127.0.0.1", None), trusted, True)


def test_unix_socket_peers_have_no_share_and_closed_ones_leave() -> None:
    t, _ = table(4)
    conns = [Conn(None, None) for _ in range(4)]
    assert all(t.admit(c, Limits(), False) for c in conns)
    t.remove(conns[0])
    t.remove(conns[0])  # twice is harmless
    assert t.admit(Conn(None), Limits(), False)
