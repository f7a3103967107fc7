"""A hybrid or recurrent model's prompt cache, on a tiny Mamba through llamad's gateway:
a conversation's turns, each followed by a restart of its instance (a stop llamad plans,
so its slots are saved, then restored into the next process). Each turn's prompt repeats
the last one's but not all of its answer, as a chat template's turn does: a recurrent
state cannot go back to where they part without a checkpoint, which llama-server's slot
file does not hold (llama.cpp #25913), so the first restore reuses nothing. That stops
the model's saves: the row counts the bytes written per turn after it, which must be
none. The floor is the bytes of the one save before it."""

from __future__ import annotations

import httpx

from bench.common import Context, Result, wait_for
from bench.procs import Daemon
from bench.tiny_hybrid import write_tiny_mamba
from llamad.client.http import Client

TURNS = 6
WORDS = "abc def ghi jkl mno pqr stu vwx yz "


def run(ctx: Context) -> list[Result]:
    """The row: bytes saved per turn once the first restore has shown it pays nothing."""
    model = write_tiny_mamba(ctx.root / "tiny-mamba.gguf")
    gw, port = ctx.port(), ctx.port()
    instances = {"mamba": {"model": model, "port": port, "ctx_size": 2048, "n_parallel": 1}}
    daemon = Daemon(ctx, "hybrid", instances, daemon={"cache_dir": ctx.root / "hybrid-cache"},
                    gateway={"listen": f"127.0.0.1:{gw}"})  # fmt: skip
    prompt, per_turn = WORDS * 4, []
    try:
        daemon.wait_running(["mamba"], 60)
        wait_for(lambda: daemon.events("gateway.listening"), 60, "the gateway listening")
        for _ in range(ctx.reps(TURNS, 3)):
            prompt += WORDS * 2
            answer = httpx.post(
                f"http://127.0.0.1:{gw}/v1/completions",
                json={"model": "mamba", "prompt": prompt, "max_tokens": 4},
                timeout=60,
            )
            answer.raise_for_status()
            saved = _saved(daemon)
            Client(daemon.socket).call("POST", "/v1/instances/mamba/restart?wait=60", timeout=90)
            daemon.wait_running(["mamba"], 60)
            per_turn.append(float(_saved(daemon) - saved))
        stopped = daemon.events("cache.stopped", instance="mamba")
    finally:
        daemon.stop()
    first, after = per_turn[0], per_turn[1:]
    note = f"turn 1 saved {int(first)} B; stopped after {len(stopped)} verdict(s): " + (
        stopped[0]["reason"] if stopped else "never"
    )
    return [
        Result("hybrid model: bytes saved per turn after the stop", len(after), "B", after,
               [first], "overhead", "max", 0.0, "0 B", note, also_ok=len(stopped) == 1),
    ]  # fmt: skip


def _saved(daemon: Daemon) -> int:
    return sum(int(e["bytes"]) for e in daemon.events("cache.saved", instance="mamba"))
