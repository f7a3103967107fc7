"""A returning conversation on the real model: its next turn after the model was evicted,
idle-stopped, upgraded, the daemon restarted and the instance killed, against the same
turn warm (never stopped) and with no cache (`cache_prompt: false`: all of it evaluated,
as a process without the saved slot would), at about 1,500 and 3,000 prompt tokens
(`--quick`: 1,500). A turn's time is that of a 1-token answer through llamad's gateway,
sent once the model is back (its load and restore timed apart); its tokens evaluated are
llama-server's `timings`. Claude-Code-shaped Anthropic turns, whose billing block's `cch`
changes, run at the end; then the save's cost at an idle stop comes from its events.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench import realmodel_client as rc
from bench.common import Context, Result, wait_for
from bench.procs import Daemon, event_time
from bench.realmodel import instance
from bench.returning_rows import Measured, rows
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
        gemma = instance(self.model, self.port, ctx_size=CTX, on_demand=True, idle_timeout=IDLE_S)
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


class Conversation:
    """A long first message, then short turns; each turn's 1-token answer timed."""

    def __init__(self, sentences: int) -> None:
        text = f"{rc.story(sentences)}\nRemember the log; I will ask about it."
        self.messages: list[dict[str, str]] = [{"role": "user", "content": text}]
        self.turns = 0
        self.last = 0  # prompt tokens of the latest turn

    def next(self, gw: int, cache: bool = True) -> tuple[rc.Turn, int]:
        """Send the next turn; (its answer, the tokens it added to the conversation)."""
        if self.turns:
            day = self.turns * 3
            self.messages += [
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": f"How many ships on day {day}? Just the number."},
            ]
        self.turns += 1
        turn = rc.first_token(gw, "gemma", self.messages, cache)
        added, self.last = turn.prompt - self.last, turn.prompt
        return turn, added


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
    d = s.start()
    s.load()
    conv = Conversation(_sentences(s.port, size))
    conv.next(s.gw)  # the whole conversation read once
    for _ in range(2):
        m.warm.append(conv.next(s.gw))
    # Evicted: the tiny model's load stops gemma (max_loaded 1).
    rc.first_token(s.gw, "other", [{"role": "user", "content": "hi"}])
    wait_for(lambda: s.states("idle"), 60, "gemma evicted")
    m.load["evicted"] = s.load()
    m.after["evicted"] = conv.next(s.gw)
    idles = len(s.states("idle"))
    wait_for(lambda: len(s.states("idle")) > idles, IDLE_S + 60, "gemma idle-stopped")
    m.stop_ms = (event_time(s.states("idle")[-1]) - event_time(s.states("stopping")[-1])) * 1000
    m.saves = d.events("cache.saved", instance="gemma")[-1:]
    m.load["idle-stopped"] = s.load()
    m.after["idle-stopped"] = conv.next(s.gw)
    # Upgraded: the same build under another path is a new executable: a rolling restart.
    pid = d.running_pid("gemma")
    s.binary = 1
    d.rewrite(s.instances(), s.keys())
    t0 = time.perf_counter()
    wait_for(lambda: d.running_pid("gemma", not_pid=pid), 180, "gemma upgraded")
    m.load["upgraded"] = time.perf_counter() - t0
    m.after["upgraded"] = conv.next(s.gw)
    d.stop()  # the daemon's shutdown saves; a new one starts from the same cache_dir
    d = s.start()
    m.load["daemon restarted"] = s.load()
    m.after["daemon restarted"] = conv.next(s.gw)
    pid = d.running_pid("gemma")
    assert pid is not None
    os.kill(pid, signal.SIGKILL)
    t0 = time.perf_counter()
    wait_for(lambda: d.running_pid("gemma", not_pid=pid), 180, "gemma back after kill -9")
    m.load["kill -9"] = time.perf_counter() - t0
    m.after["kill -9"] = conv.next(s.gw)
    m.nocache = conv.next(s.gw, cache=False)
    if size == SIZES[0]:
        m.claude = _claude_turns(s, conv.messages[0]["content"])
    return m


def _sentences(port: int, size: int) -> int:
    """Story lines for a conversation of about `size` tokens: guessed, then corrected."""
    guess = max(1, round(size / (rc.tokens(port, rc.story(20)) / 20)))
    return max(1, round(guess * size / rc.tokens(port, rc.story(guess))))


BILLING = "x-anthropic-billing-header: cc_version=2.1.42.834; cc_entrypoint=cli; cch={};"


def _claude_turns(s: Stage, system: str) -> tuple[int, int]:
    """Two Anthropic turns, the billing block's `cch` changed between them:
    (the second's tokens evaluated, the tokens it added), from /v1/activity."""
    messages: list[dict[str, str]] = [{"role": "user", "content": "What is this log about?"}]
    seen: list[dict[str, Any]] = []
    for cch in ("65abc", "1f0e2"):
        body = {
            "model": "gemma",
            "max_tokens": 1,
            "temperature": 0,
            "system": [
                {"type": "text", "text": BILLING.format(cch)},
                {"type": "text", "text": system},
            ],
            "messages": messages,
        }
        rc.post(s.gw, "/v1/messages", body, {"anthropic-version": "2023-06-01"})
        seen.append(rc.get_json(s.gw, "/v1/activity")["data"][0])
        messages = [*messages, {"role": "assistant", "content": "A lighthouse."},
                    {"role": "user", "content": "Which day had the most ships?"}]  # fmt: skip
    total = [int(r["prompt_cached"] or 0) + int(r["prompt_evaluated"] or 0) for r in seen]
    return int(seen[1]["prompt_evaluated"] or 0), total[1] - total[0]
