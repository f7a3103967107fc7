"""Replicas across the fleet, end to end: three real daemons on loopback, A in front of
B and C, which both serve `shared` with two slots each."""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import replica_helpers
from fleet_helpers import Host
from fleet_trio import SLOTS, Replica, activity, trio
from helpers import wait_for
from replica_helpers import peaks

# Three daemons and three llama-servers on a busy 2-core machine.
pytestmark = pytest.mark.timeout(240)

SYSTEM = "You are a patient assistant who answers every question in full. " * 6


@pytest.fixture
def fleet(tiny_model: Path) -> Iterator[tuple[Host, Replica, Replica]]:
    with trio(tiny_model) as daemons:
        yield daemons


def chat(front: Host, messages: list[dict[str, str]], **headers: str) -> dict[str, Any]:
    return replica_helpers.chat(front.gateway, messages, **headers)


def stream(front: Host, tokens: int = 24) -> str:
    return replica_helpers.stream(front.gateway, tokens)


def test_sixteen_streams_share_both_replicas_and_no_server_takes_more_than_its_slots(
    fleet: tuple[Host, Replica, Replica],
) -> None:
    a, b, c = fleet
    listed = [m for m in a.models().values() if m["id"] == "shared"]
    assert len(listed) == 1
    assert listed[0]["llamad"]["replicas"] == ["b", "c"]
    reads = {
        name: lambda r=r: r.host.ld.instance("shared")["gateway"]
        for name, r in (("b", b), ("c", c))
    }
    with peaks(reads) as peaks_seen, ThreadPoolExecutor(16) as pool:
        outcomes = list(pool.map(lambda _: stream(a), range(48)))
    assert outcomes == ["done"] * 48
    hosts = Counter(r["host"] for r in activity(a, 48))
    # Both used (a server slowed by the other's threads on 2 cores just serves fewer).
    assert min(hosts["b"], hosts["c"]) >= 4, hosts
    # A queued the rest itself: no server ever held more than its slots. (No free slot
    # left while others wait is forced in test_replicas_inprocess.py: polled from
    # outside, a replica's two requests can overlap between two polls, and a busy
    # machine can starve the poller through a replica's every request: that each served
    # is the activity's word above, not the poller's.)
    for name in "bc":
        assert peaks_seen[name] <= SLOTS, (peaks_seen, hosts)
        assert peaks_seen[name + "-queued"] == 0, peaks_seen


def test_the_next_turn_lands_where_its_prefix_is_cached(
    fleet: tuple[Host, Replica, Replica],
) -> None:
    a, _, _ = fleet
    talks, homes = replica_helpers.converse(a.gateway, "xyz", 4, "host", SYSTEM)
    seen = 12
    assert all(len(h) == 1 for h in homes.values()), homes
    assert {h for hs in homes.values() for h in hs} == {"b", "c"}  # conversations spread
    # Opted out, the next turn goes by balance alone: to the replica chosen least recently,
    # which is not the home of z, the conversation served last.
    (home,) = homes["z"]
    talks["z"].append({"role": "user", "content": "and now?"})
    chat(a, talks["z"], **{"x-llamad-affinity": "off"})
    assert activity(a, seen + 1)[-1]["host"] != home


def test_a_replica_killed_mid_run_loses_no_plain_request_and_is_skipped_until_back(
    fleet: tuple[Host, Replica, Replica],
) -> None:
    a, _b, c = fleet
    killed = threading.Event()
    statuses: list[int] = []
    streams: list[str] = []

    def plain() -> None:
        for _ in range(12):
            body = {
                "model": "shared",
                "max_tokens": 48,
                "messages": [{"role": "user", "content": "count"}],
            }
            r = httpx.post(f"{a.gateway}/v1/chat/completions", json=body, timeout=60)
            statuses.append(r.status_code)

    def streamed() -> None:
        for _ in range(8):
            streams.append(stream(a, 48))

    with ThreadPoolExecutor(6) as pool:
        jobs = [pool.submit(plain) for _ in range(4)] + [pool.submit(streamed) for _ in range(2)]
        wait_for(
            lambda: {"b", "c"} <= {r["host"] for r in activity(a, 1)}, 30, "both replicas serving"
        )
        c.host.ld.close()  # SIGKILL: its gateway and llama-server go at once
        killed.set()
        for job in jobs:
            job.result(timeout=120)
    assert statuses == [200] * 48, Counter(statuses)  # nothing lost before the first byte
    assert set(streams) <= {"done", "error"}, Counter(streams)  # a cut stream says so
    # Skipped until back: the next requests all go to b.
    before = len(activity(a, 1))
    for _ in range(4):
        chat(a, [{"role": "user", "content": "still there?"}])
    assert {r["host"] for r in activity(a, before + 4)[-4:]} == {"b"}
    c.restart()
    asked = itertools.count()
    wait_for(lambda: _served_by(a, "c", next(asked)), 60, "A sending to c again once it is back")


def _served_by(front: Host, host: str, n: int) -> bool:
    """One more request, a new conversation (each has its home replica), and whether the
    replica on `host` served it."""
    chat(front, [{"role": "user", "content": f"who is {n}?"}])
    records = httpx.get(f"{front.gateway}/v1/activity?model=shared&limit=1", timeout=5).json()[
        "data"
    ]
    return bool(records) and records[0]["host"] == host
