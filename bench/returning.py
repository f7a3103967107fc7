"""A returning conversation on the real model: its next turn after the model was evicted,
idle-stopped, upgraded, the daemon restarted and the instance killed, against the same
conversation's warm turn just before each event (the pair's ratio counts) and with no
cache (`cache_prompt: false`: all of it evaluated, as a process without the saved slot
would), at about 1,500 and 3,000 prompt tokens (`--quick`: 1,500, two rounds, not three).
A turn's time is that of a 1-token answer through llamad's gateway, sent once the model is
back (its load and restore timed apart); its tokens evaluated are llama-server's
`timings`. Claude-Code-shaped Anthropic turns, whose billing block's `cch` changes, run at
the end; the save's cost comes from each idle stop's events (the background saves'
beside it, in the note).
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import realmodel_client as rc
from bench.common import Context, Result, wait_for
from bench.conversation import Conversation, claude_turns, sentences
from bench.procs import Daemon, event_time
from bench.realmodel import instance
from bench.returning_rows import Measured, Stop, rows
from llamad.client.http import Client

IDLE_S = 8.0  # gemma's idle_timeout: long enough for every other step between turns
SIZES = (1500, 3000)
CTX = 4096  # the longer conversation and its turns


@dataclass
class Stage:
    """One llamad serving gemma (on demand) and a tiny model that evicts it."""

    ctx: Context
    model: Path
    binaries: tuple[Path, Path]  # two names of the same llama-server: an upgrade
    cache: Path
    gw: int = 0
    port: int = 0
    other: int = 0
    daemon: Daemon | None = None
    binary: int = 0
    started: list[Daemon] = field(default_factory=list)

    def instances(self) -> dict[str, dict[str, object]]:
        # At 4096 the full-size window cache costs 1.17x: chosen here, as a user would.
        gemma = instance(self.model, self.port, ctx_size=CTX, on_demand=True,
                         idle_timeout=IDLE_S, swa_full=True)  # fmt: skip
        other = {"model": self.ctx.model, "port": self.other, "ctx_size": 256,
                 "n_parallel": 1, "on_demand": True}  # fmt: skip
        return {"gemma": gemma, "other": other}

    def keys(self) -> dict[str, object]:
        return {"llama_server": self.binaries[self.binary], "cache_dir": self.cache}

    def start(self) -> Daemon:
        self.gw, self.port, self.other = self.gw or self.ctx.port(), self.port or self.ctx.port(), \
            self.other or self.ctx.port()  # fmt: skip
        d = Daemon(self.ctx, "returning", self.instances(), daemon=self.keys(),
                   gateway={"listen": f"127.0.0.1:{self.gw}", "max_loaded": 1})  # fmt: skip
        self.started.append(d)
        d.wait_socket()
        self.daemon = d
        return d

    @property
    def d(self) -> Daemon:
        assert self.daemon is not None
        return self.daemon

    def load(self) -> float:
        """Start gemma (its saved slots restored before it runs); seconds until running."""
        t0 = time.perf_counter()
        Client(self.d.socket).call("POST", "/v1/instances/gemma/start?wait=180", timeout=200)
        self.d.wait_running(["gemma"], 180)
        return time.perf_counter() - t0

    def states(self, to: str) -> list[dict[str, Any]]:
        return self.d.events("instance.state_changed", instance="gemma", to=to)

    def stop_all(self) -> None:
        for d in self.started:
            d.stop()


def run(ctx: Context) -> list[Result]:
    """Every returning-conversation row, at each size."""
    model = rc.real_model(ctx.root)
    links = (ctx.root / "llama-server-a", ctx.root / "llama-server-b")
    for link in links:
        link.symlink_to(ctx.binary)
    out: list[Result] = []
    for size in SIZES[:1] if ctx.quick else SIZES:
        stage = Stage(ctx, model, links, ctx.root / f"cache-{size}")
        try:
            out += rows(size, _measure(stage, size))
        finally:
            stage.stop_all()
    return out


def _measure(s: Stage, size: int) -> Measured:
    m = Measured()
    s.start()
    s.load()
    # Every round adds about 260 tokens: the conversation straddles `size`.
    conv = Conversation(sentences(s.port, size - GROWTH * s.ctx.reps(3, 2) // 2))
    m.first = conv.next(s.gw)[0].prompt  # the whole conversation read once
    for _ in range(s.ctx.reps(3, 2)):
        for what, event in EVENTS.items():
            m.warm.setdefault(what, []).append(conv.next(s.gw))  # the pair's warm turn
            m.load.setdefault(what, []).append(event(s, m))
            m.after.setdefault(what, []).append(conv.next(s.gw))
    m.background = [(float(e["ms"]), e.get("server_ms"), int(e["bytes"])) for d in s.started
                    for e in d.events("cache.saved", instance="gemma", why="turn")]  # fmt: skip
    m.nocache = conv.next(s.gw, cache=False)
    if size == SIZES[0]:
        m.claude = claude_turns(s.gw, conv.messages[0]["content"])
    return m


def _evict(s: Stage, m: Measured) -> float:
    """The tiny model's load stops gemma (max_loaded 1); then gemma is loaded again."""
    idles = len(s.states("idle"))
    rc.first_token(s.gw, "other", [{"role": "user", "content": "hi"}])
    wait_for(lambda: len(s.states("idle")) > idles, 60, "gemma evicted")
    return s.load()


def _idle(s: Stage, m: Measured) -> float:
    """What the save added to the stop is its `cache.stop_saved` (the whole step, logged
    before `stopping`); what it kept, the slot's latest save, at the stop or before."""
    idles = len(s.states("idle"))
    wait_for(lambda: len(s.states("idle")) > idles, IDLE_S + 60, "gemma idle-stopped")
    step = s.d.events("cache.stop_saved", instance="gemma")[-1]
    rest = event_time(s.states("idle")[-1]) - event_time(s.states("stopping")[-1])
    kept = s.d.events("cache.saved", instance="gemma", slot=0)[-1]
    m.saves.append(Stop(float(step["ms"]), int(step["bytes"]), int(kept["bytes"]),
                        float(step["ms"]) + rest * 1000))  # fmt: skip
    return s.load()


def _upgrade(s: Stage, m: Measured) -> float:
    """The same build under another path is a new executable: a rolling restart."""
    pid = s.d.running_pid("gemma")
    s.binary = 1 - s.binary
    s.d.rewrite(s.instances(), s.keys())
    t0 = time.perf_counter()
    wait_for(lambda: s.d.running_pid("gemma", not_pid=pid), 180, "gemma upgraded")
    return time.perf_counter() - t0


def _restart(s: Stage, m: Measured) -> float:
    """The daemon's shutdown saves; a new one starts from the same cache_dir."""
    s.d.stop()
    s.start()
    return s.load()


def _kill(s: Stage, m: Measured) -> float:
    """A crash loses what ended since the last background save, which comes at most
    `cache_save_interval` after a turn: the kill waits for the warm turn's (how long is
    reported), then comes anyway."""
    t0, turn = time.perf_counter(), m.warm["kill -9"][-1][0].prompt

    def saved() -> bool:
        return any(int(e["tokens"]) >= turn for e in s.d.events("cache.saved", instance="gemma"))

    with contextlib.suppress(TimeoutError):
        wait_for(saved, 30, "the last turn saved")
    m.kill_wait.append(time.perf_counter() - t0)
    pid = s.d.running_pid("gemma")
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    t0 = time.perf_counter()
    wait_for(lambda: s.d.running_pid("gemma", not_pid=pid), 180, "gemma back after kill -9")
    return time.perf_counter() - t0


EVENTS = {
    "evicted": _evict,
    "idle-stopped": _idle,
    "upgraded": _upgrade,
    "daemon restarted": _restart,
    "kill -9": _kill,
}
GROWTH = 2 * 26 * len(EVENTS)  # tokens a round of turns adds
