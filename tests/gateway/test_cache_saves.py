"""The gateway tells the prompt cache what each request left in its slot: a slot holding
`cache_save_tokens` or more is saved in the background once a turn changed it, however
few tokens the turn added, and a kill -9 of the instance then loses nothing of it
(llamad, its gateway, the real llama-server and the tiny model)."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import httpx
from gateway_helpers import gateway

TURN = "abc def ghi jkl mno pqr stu vwx yz " * 4
NEXT = " and then one more line"
LONG = TURN * 3


def _complete(base: str, prompt: str) -> dict[str, Any]:
    body = {"model": "m", "prompt": prompt, "n_predict": 2, "temperature": 0}
    reply = httpx.post(f"{base}/completion", json=body, timeout=30)
    assert reply.status_code == 200, reply.text
    answer: dict[str, Any] = reply.json()
    return answer


def test_a_kill_after_a_saved_turn_loses_nothing(tiny_model: Path) -> None:
    """The turn is saved after it ends, a request sent right after it is answered
    meanwhile, and after a kill -9 and the supervisor's restart the next turn evaluates
    only what it adds."""
    instances = {"m": {"ctx_size": 512, "n_parallel": 1}}
    daemon = {"cache_save_tokens": 16}
    with gateway(tiny_model, instances, daemon=daemon, supervise={"backoff_initial": 0.1}) as gw:
        first = _complete(gw.base, TURN)
        assert first["timings"]["prompt_n"] > 16
        prompt = TURN + first["content"]
        _complete(gw.base, prompt)  # while the first turn's save may be under way
        gw.ld.wait_event("cache.saved", why="turn", instance="m")
        # Nothing new was added since (the second turn only re-read the first), or it
        # is saved too: either way the slot on disk holds `prompt`.
        pid = gw.ld.running("m")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        gw.ld.wait_running("m", 30, not_pid=pid)
        again = _complete(gw.base, prompt + NEXT)
    assert gw.ld.events("cache.restored", instance="m")
    assert again["timings"]["prompt_n"] <= len(NEXT) + 2, again["timings"]


def test_a_short_turn_of_a_long_conversation_is_saved(tiny_model: Path) -> None:
    """A turn that adds far fewer tokens than `cache_save_tokens` to a slot holding more
    is saved too, once the interval since the last save allows: a kill -9 after it loses
    nothing."""
    instances = {"m": {"ctx_size": 512, "n_parallel": 1}}
    daemon = {"cache_save_tokens": 64, "cache_save_interval": 0.5}
    with gateway(tiny_model, instances, daemon=daemon, supervise={"backoff_initial": 0.1}) as gw:
        first = _complete(gw.base, LONG)
        assert first["timings"]["prompt_n"] >= 64
        gw.ld.wait_event("cache.saved", why="turn", instance="m")
        prompt = LONG + first["content"] + NEXT
        second = _complete(gw.base, prompt)
        assert second["timings"]["prompt_n"] + second["timings"]["predicted_n"] < 64
        gw.ld.wait_event("cache.saved", count=2, why="turn", instance="m")
        pid = gw.ld.running("m")
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        gw.ld.wait_running("m", 30, not_pid=pid)
        again = _complete(gw.base, prompt + second["content"] + NEXT)
    assert again["timings"]["prompt_n"] <= len(NEXT) + 2, again["timings"]
