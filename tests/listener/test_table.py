"""A listener's connections: the cap, one address's share, and who goes to make room."""

from __future__ import annotations

from dataclasses import dataclass, field

from llamad.listener.limits import Limits
from llamad.listener.table import LOOPBACK, ConnTable, share_key


@dataclass(eq=False)
class Conn:
    key: str | None
    idle_since: float | None = 0.0
    evicted: bool = field(default=False)
    trusted: bool = False
    surplus: bool = False

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
        t.moved(c)
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


def test_every_loopback_address_is_one_share() -> None:
    hosts = ("127.0.0.1", "127.0.0.2", "127.9.9.9", "::1", "::ffff:127.0.0.5")
    keys = {share_key(h) for h in hosts}
    assert keys == {LOOPBACK}
    assert share_key("10.0.0.1") == "10.0.0.1"
    assert share_key(None) is None


def test_a_vouched_connection_is_never_closed_for_room() -> None:
    t, _ = table(4)  # a share of 1
    vouched = Conn("10.0.0.1", 1.0)
    assert t.admit(vouched, Limits(), False)
    t.vouch(vouched, "alice", Limits())
    assert vouched.trusted
    assert vouched.key == "key:alice"
    strangers = [Conn(f"10.0.0.{n}", 2.0) for n in range(2, 5)]
    assert all(t.admit(c, Limits(), False) for c in strangers)
    assert t.admit(Conn("10.0.0.9", 3.0), Limits(), False)  # the cap: a stranger goes
    assert not vouched.evicted
    assert strangers[0].evicted


def test_a_key_past_its_share_vouches_for_no_more() -> None:
    t, _ = table(4)  # a share of 1
    first, second = Conn("10.0.0.1", None), Conn("10.0.0.2", None)
    assert t.admit(first, Limits(), False)
    assert t.admit(second, Limits(), False)
    t.vouch(first, "alice", Limits())
    t.vouch(second, "alice", Limits())  # the first is busy: the second stays a stranger
    assert first.trusted
    assert not second.trusted
    assert second.key == "10.0.0.2"


def test_a_keys_surplus_goes_for_room_even_while_serving() -> None:
    t, said = table(4)  # a share of 1
    mine, extra = Conn(LOOPBACK, None), Conn(LOOPBACK, None)
    assert t.admit(mine, Limits(), False)
    t.vouch(mine, "limited", Limits())
    assert t.admit(extra, Limits(), False)
    t.vouch(extra, "limited", Limits())  # past the key's share: a stranger's, and surplus
    assert extra.surplus
    assert t.admit(Conn(LOOPBACK, None), Limits(), False)  # a newcomer takes its place
    assert extra.evicted
    assert not mine.evicted
    assert said == [("share_evicted_surplus", LOOPBACK)]


def test_the_longest_waiting_goes_first_whatever_the_order_they_came_in() -> None:
    t, _ = table(12)  # a share of 3
    first, second, third = (Conn("10.0.0.1", s) for s in (1.0, 2.0, 3.0))
    for c in (first, second, third):
        assert t.admit(c, Limits(), False)
    first.idle_since = None  # serves a request, and waits again after the others
    t.moved(first)
    first.idle_since = 4.0
    t.moved(first)
    third.idle_since = 0.0  # refused: the first to go
    t.moved(third)
    newcomers = [Conn("10.0.0.1", 5.0 + n) for n in range(3)]
    for newcomer in newcomers:
        assert t.admit(newcomer, Limits(), False)
    assert [third.evicted, second.evicted, first.evicted] == [True, True, True]
    assert not any(c.evicted for c in newcomers)


class Watched(Conn):
    """A connection that counts how often the table looks at its `idle_since`."""

    looks = 0

    def __getattribute__(self, name: str) -> object:
        if name == "idle_since":
            Watched.looks += 1
        return object.__getattribute__(self, name)


def test_making_room_looks_at_a_few_connections_not_the_share() -> None:
    """A neighbour that keeps its share full of waiting connections, each closed for a
    newcomer of its own, costs each newcomer the same however large the share."""
    t, _ = table(4096)  # a share of 1,024
    for n in range(1024):
        assert t.admit(Watched(LOOPBACK, float(n)), Limits(), False)
    Watched.looks = 0
    for n in range(100):
        assert t.admit(Watched(LOOPBACK, 2000.0 + n), Limits(), False)
    assert Watched.looks < 100 * 10


def test_a_mark_out_of_order_takes_its_place_among_the_others() -> None:
    t, _ = table(12)  # a share of 3
    early, late, middle = Conn("10.0.0.1", 1.0), Conn("10.0.0.1", 3.0), Conn("10.0.0.1", 2.0)
    for c in (early, late, middle):
        assert t.admit(c, Limits(), False)
    gone = []
    for _ in range(3):
        newcomer = Conn("10.0.0.1", None)
        assert t.admit(newcomer, Limits(), False)
        gone.append([c for c in (early, middle, late) if c.evicted])
    assert gone == [[early], [early, middle], [early, middle, late]]
