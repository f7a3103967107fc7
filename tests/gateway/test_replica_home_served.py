"""A conversation's home replica with real llama-servers (two local instances of the
tiny model sharing an alias): its turns go home, and stay there after the replica
restarts and after the daemon (and its gateway's memory) restarts, each time finding
its prompt in the cache the replica restored."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import Llamad, free_port, short_dir, wait_for, write_config

from llamad.gateway.replicas.hints import Hints
from llamad.gateway.replicas.home import home
from llamad.gateway.replicas.replica import LOCAL

pytestmark = pytest.mark.timeout(180)

ONE = {"ctx_size": 2048, "n_parallel": 1, "threads": 1, "aliases": ["shared"]}
SYSTEM = "You are a patient assistant who answers every question in full. " * 4


def _away_from_balance() -> list[dict[str, str]]:
    """A conversation whose home is r1: balance alone would send it to r0 (the first of
    two idle replicas), so only the home can put it on r1."""
    for n in range(100):
        messages = [{"role": "system", "content": f"{n}. {SYSTEM}"},
                    {"role": "user", "content": "turn 0: go on"}]  # fmt: skip
        conversation = Hints({"messages": messages}).conversation
        assert conversation is not None
        if home(conversation, [(LOCAL, "r0"), (LOCAL, "r1")]) == (LOCAL, "r1"):
            return messages
    raise AssertionError("no conversation found whose home is r1")


def _turn(ld: Llamad, base: str, messages: list[dict[str, str]]) -> tuple[str, int]:
    """Send the conversation's next turn: (the instance that served it, tokens cached).
    As a person's next turn would, it comes once the last has left its slot."""
    idle = lambda: all(ld.instance(n)["gateway"]["in_flight"] == 0 for n in ("r0", "r1"))  # noqa: E731
    wait_for(idle, 10, "the last turn gone from its slot")
    body = {"model": "shared", "messages": messages, "max_tokens": 4, "temperature": 0}
    reply = httpx.post(f"{base}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()
    records = httpx.get(f"{base}/v1/activity?model=shared", timeout=5).json()["data"]
    messages += [{"role": "assistant", "content": answer["choices"][0]["message"]["content"]},
                 {"role": "user", "content": f"turn {len(messages) // 2}: go on"}]  # fmt: skip
    return str(records[0]["instance"]), int(answer["timings"]["cache_n"])


def _up(ld: Llamad, base: str) -> None:
    ld.wait_ready()
    for name in ("r0", "r1"):
        ld.wait_running(name, 60)
    ld.wait_event("gateway.listening")


def test_a_conversation_keeps_its_replica_across_restarts(tiny_model: Path) -> None:
    d = short_dir()
    port = free_port()
    tables = {n: {"model": tiny_model, "port": free_port(), **ONE} for n in ("r0", "r1")}
    cfg = write_config(d / "llamad.toml", tables,
                       daemon={"state_dir": str(d / "state"), "cache_dir": str(d / "cache")},
                       gateway={"listen": f"127.0.0.1:{port}"})  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    messages = _away_from_balance()
    with Llamad(cfg) as ld:
        _up(ld, base)
        assert _turn(ld, base, messages)[0] == "r1"
        assert _turn(ld, base, messages)[0] == "r1"
        pid = ld.running("r1")
        ld.api("POST", "/v1/instances/r1/restart?wait=60", timeout=70)
        ld.wait_running("r1", 60, not_pid=pid)
        where, cached = _turn(ld, base, messages)
        assert (where, cached > 0) == ("r1", True)  # restored, and still its home
        assert ld.stop() == 0
    with Llamad(cfg) as ld:  # a new gateway: nothing remembered but the names
        _up(ld, base)
        where, cached = _turn(ld, base, messages)
        assert (where, cached > 0) == ("r1", True)
        assert ld.stop() == 0
