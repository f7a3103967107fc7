"""The prompt cache's background saves, on the real llama-server and the tiny model: a
slot saved after a turn outlives a kill -9, saves are bounded in rate and coalesced (a
save that falls due sooner waits, it is not dropped), a slot holding fewer than
`cache_save_tokens` owes none, and a slot that has not changed is not written again."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from helpers import free_port, until
from inprocess import Sup, complete, config, events, saving, supervising
from structlog.testing import capture_logs

from llamad.backends.spec import InstanceSpec
from llamad.lifecycle.states import State
from llamad.supervise.slot_cache import Written
from llamad.supervise.slot_checkpoints import Checkpoints
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
            held = first["timings"]["prompt_n"] + first["timings"]["predicted_n"]
            assert held > 16
            saves.grew("m", held)
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
    # The stop only asked for the slots, and says so.
    assert events(logs, "cache.stop_saved", instance="m", slots=0, bytes=0)


async def test_a_slot_under_the_threshold_owes_no_save(tmp_path: Path, tiny_model: Path) -> None:
    """What a slot holds counts, not what turns added: however many short turns end, a
    slot holding fewer than `cache_save_tokens` owes nothing; one holding that many does."""
    port = free_port()
    async with supervising(config(tmp_path, _tiny(tiny_model, port))) as sup:
        await sup.state("m", State.RUNNING)
        async with saving(sup, tokens=16) as saves:
            for _ in range(5):
                saves.grew("m", 15)
            assert not saves.owed()
            saves.grew("m", 16)
            assert saves.owed()


@dataclass
class _Saver:
    """A saver that answers each save with the next of `results` (then `rest`), after
    `wait` seconds: a save llama-server held behind a request."""

    results: list[Written]
    rest: Written = field(default_factory=Written)
    wait: float = 0.0
    calls: list[float] = field(default_factory=list)

    async def checkpoint(self, spec: InstanceSpec, least: int = 0) -> Written:
        self.calls.append(time.monotonic())
        await asyncio.sleep(self.wait)
        return self.results.pop(0) if self.results else self.rest

    def served(self, instance: str, cached: int | None, evaluated: int | None) -> None:
        pass  # no restores here to judge


async def _two_saves(sup: Sup, saver: _Saver, interval: float, requests: int) -> Checkpoints:
    """Background saves with `saver` until it was called twice; `requests` end, each
    once the save before has begun."""
    daemon = replace(sup.resolved.daemon, cache_save_tokens=16, cache_save_interval=interval)
    saves = Checkpoints(saver, sup.supervisor.instances, lambda: daemon)
    done = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        group.create_task(saves.run(done))
        for n in range(requests):
            await until(lambda: len(saver.calls) >= n, 10, "the save before")  # noqa: B023
            saves.grew("m", 100)
        await until(lambda: len(saver.calls) >= 2, 10, "the second save")
        done.set()
    return saves


async def test_a_busy_slot_is_saved_later_not_dropped(tmp_path: Path, tiny_model: Path) -> None:
    """A save that found the changed slot busy stays owed: the next comes when the
    interval allows, though no request ended since."""
    port = free_port()
    interval = 0.5
    async with supervising(config(tmp_path, _tiny(tiny_model, port))) as sup:
        await sup.state("m", State.RUNNING)
        saver = _Saver([Written(busy=True)])
        saves = await _two_saves(sup, saver, interval, requests=1)
    assert saver.calls[1] - saver.calls[0] >= interval * 0.9
    assert not saves.owed()


async def test_the_share_counts_the_write_not_the_wait(tmp_path: Path, tiny_model: Path) -> None:
    """A save llama-server held behind a request for 1 s, then wrote in 10 ms, kept it
    busy 10 ms: the next save waits the interval, not 20 s."""
    port = free_port()
    async with supervising(config(tmp_path, _tiny(tiny_model, port))) as sup:
        await sup.state("m", State.RUNNING)
        saver = _Saver([], rest=Written(slots=1, seconds=0.01), wait=1.0)
        await _two_saves(sup, saver, 0.2, requests=2)
    assert saver.calls[1] - saver.calls[0] < 5


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
