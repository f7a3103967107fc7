"""The prompt cache's background saves, on the real llama-server and the tiny model: a
slot saved after a turn outlives a kill -9, saves are bounded in rate and coalesced,
and a slot that has not changed is not written again."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

from helpers import free_port, until
from inprocess import complete, config, events, saving, supervising
from structlog.testing import capture_logs

from llamad.lifecycle.states import State
from llamad.supervise.steps import stop

TURN = "abc def ghi jkl mno pqr stu vwx yz " * 4
NEXT = " and then one more line"


def _tiny(tiny_model: Path, port: int) -> dict[str, dict[str, Any]]:
    return {"m": {"model": tiny_model, "port": port, "ctx_size": 512, "n_parallel": 1}}


async def _saved(logs: list[dict[str, Any]], count: int, timeout: float = 10.0) -> None:
    await until(lambda: len(events(logs, "cache.saved", why="turn")) >= count, timeout, "saves")


async def test_a_kill_loses_at_most_the_last_turn(tmp_path: Path, tiny_model: Path) -> None:
    """A turn that added enough tokens is saved in the background; after a kill -9 the
    supervisor's next process gets it back, and the next turn evaluates only its own."""
    port = free_port()
    cfg = config(tmp_path, _tiny(tiny_model, port), backoff_initial=0.1)
    with capture_logs() as logs:
        async with supervising(cfg) as sup, saving(sup) as saves:
            inst = await sup.state("m", State.RUNNING)
            first = await complete(port, TURN)
            added = first["timings"]["prompt_n"] + first["timings"]["predicted_n"]
            assert added > 16
            saves.grew("m", added)
            await _saved(logs, 1)
            assert inst.child is not None
            pid = inst.child.pid
            os.kill(pid, signal.SIGKILL)
            await until(lambda: inst.child is not None and inst.child.pid != pid, 20, "restart")
            await sup.state("m", State.RUNNING)
            again = await complete(port, TURN + first["content"] + NEXT)
    assert events(logs, "cache.restored", instance="m", slot=0)
    # Only the new line, and the last token generated (sampled, never decoded).
    assert again["timings"]["prompt_n"] <= len(NEXT) + 2, again["timings"]


async def test_saves_are_bounded_in_rate_and_coalesced(tmp_path: Path, tiny_model: Path) -> None:
    """The first save comes at once; what the next turns add waits out the interval and
    is saved once; a slot that did not change is not written again, not even at a stop."""
    port = free_port()
    interval = 1.5
    with capture_logs() as logs:
        async with supervising(config(tmp_path, _tiny(tiny_model, port))) as sup:
            async with saving(sup, interval=interval) as saves:
                inst = await sup.state("m", State.RUNNING)
                prompt = TURN
                for n in range(4):
                    answer = await complete(port, prompt)
                    saves.grew("m", 100)
                    if n == 0:
                        await _saved(logs, 1)
                        first = time.monotonic()
                    prompt += answer["content"] + f" turn {n}"
                assert len(events(logs, "cache.saved", why="turn")) == 1
                await _saved(logs, 2)
                assert time.monotonic() - first >= interval * 0.9
                saves.grew("m", 100)  # owed, but nothing changed since
                await until(lambda: not saves.owed(), 10, "the save owed taken")
            await stop(inst)
    assert len(events(logs, "cache.saved", why="turn")) == 2
    assert not events(logs, "cache.saved", why="stop")


async def test_zero_tokens_turns_background_saves_off(tmp_path: Path, tiny_model: Path) -> None:
    """`cache_save_tokens = 0`: however much a turn adds, nothing is owed."""
    port = free_port()
    cfg = config(tmp_path, _tiny(tiny_model, port))
    async with supervising(cfg) as sup, saving(sup, tokens=0) as saves:
        saves.grew("m", 10_000)
        assert not saves.owed()


async def test_a_short_prompt_is_not_saved_in_the_background(
    tmp_path: Path, tiny_model: Path
) -> None:
    """A slot holding fewer tokens than `cache_save_tokens` is not worth stalling the
    server for: a background save leaves it, a save without the floor writes it."""
    port = free_port()
    with capture_logs() as logs:
        async with supervising(config(tmp_path, _tiny(tiny_model, port))) as sup:
            inst = await sup.state("m", State.RUNNING)
            cache = sup.supervisor.runtime.cache
            assert cache is not None
            short = await complete(port, "hi")
            held = short["timings"]["prompt_n"] + short["timings"]["predicted_n"]
            await cache.checkpoint(inst.spec, least=held + 16)
            assert not events(logs, "cache.saved", why="turn")
            await cache.checkpoint(inst.spec, least=1)
            assert len(events(logs, "cache.saved", why="turn")) == 1
