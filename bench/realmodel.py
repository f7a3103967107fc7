"""The real model's table: gemma-3-270m Q4_K_M served by llama-server directly and through
llamad's gateway, in the shape of the seed measurements (../shared/seeds/).

- generation: tokens per second of a streamed 128-token answer (`ignore_eos`), timed at
  the client from its first token to its last, median of 3 warm requests;
- prompt: tokens per second of a ~700-token prompt with the cache defeated (a unique
  first line and `cache_prompt: false`), prompt tokens over the 1-token answer's time;
- cold load: from launching llama-server (direct) or from the request to a model llamad
  has not loaded, to the first token;
- RSS of llama-server with the model loaded (and llamad's own beside it, in the note);
  and at ctx 32768 with the prompt cache on, against llama-server alone (window_memory.py).

Both run the same argv (resolved by llamad's config code), two threads, one slot, a small
context; their requests alternate, so a busy spell of the machine falls on both.
"""

from __future__ import annotations

import statistics
import subprocess
import time

import psutil

from bench import realmodel_client as rc
from bench import window_memory
from bench.common import Context, Result, wait_healthy
from bench.procs import Daemon, floor_specs, launch_direct, stop_direct

GEMMA = {"ctx_size": 2048, "n_parallel": 1, "threads": 2}
PROMPT_TOKENS = 700
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


def instance(model: object, port: int, **more: object) -> dict[str, object]:
    """The real model's instance: two threads, one slot, a small context."""
    return {"model": model, "port": port, **GEMMA, **more}


def run(ctx: Context) -> list[Result]:
    """Cold load, generation and prompt rates, RSS: direct against llamad."""
    model = rc.real_model(ctx.root)
    direct_port, gw, port = ctx.port(), ctx.port(), ctx.port()
    spec = floor_specs(ctx, {"gemma": instance(model, direct_port)})[0]
    procs: list[subprocess.Popen[bytes]] = []
    daemon = Daemon(ctx, "realmodel", {"gemma": instance(model, port, on_demand=True)},
                    gateway={"listen": f"127.0.0.1:{gw}"})  # fmt: skip
    try:
        daemon.wait_socket()
        t0 = time.perf_counter()
        procs.append(launch_direct(ctx, spec, ctx.root / "realmodel-direct.log"))
        wait_healthy([direct_port], t0, 120.0)
        rc.first_token(direct_port, "gemma", QUESTION)
        cold_direct = time.perf_counter() - t0
        t0 = time.perf_counter()
        rc.first_token(gw, "gemma", QUESTION)
        cold_ours = time.perf_counter() - t0
        sentences = _sentences(direct_port)
        ours, floor = _rates(ctx, gw, direct_port, sentences)
        server_pid = daemon.running_pid("gemma")
        rss = [_rss(server_pid), _rss(procs[0].pid), _rss(daemon.proc.pid)]
        same = _same_run(server_pid, procs[0].pid)
    finally:
        stop_direct(procs)
        daemon.stop()
    rows = _rows(ours, floor, cold_ours, cold_direct, rss)
    rows.append(window_memory.row(ctx, instance(model, 0)))
    ctx.notes["realmodel"] = f"llama-server under llamad and direct: {same}"
    return rows


def _same_run(ours: int | None, direct: int) -> str:
    """Whether both llama-servers run alike: argv (but the port and the save directory),
    `LLAMA_*` environment, niceness, CPUs allowed."""
    a, b = psutil.Process(ours), psutil.Process(direct)

    def argv(p: psutil.Process) -> list[str]:
        words = p.cmdline()[1:]
        apart = ("--port", "--slot-save-path")  # each its own, by design
        kept = [w for i, w in enumerate(words) if not {w, words[i - 1]} & set(apart)]
        env = sorted(f"{k}={v}" for k, v in p.environ().items() if k.startswith("LLAMA_"))
        return kept + [e for e in env if not e.startswith("LLAMA_ARG_PORT=")]

    alike = argv(a) == argv(b) and a.nice() == b.nice() and a.cpu_affinity() == b.cpu_affinity()
    return (
        "same argv (but the port and save directory), LLAMA_* environment, niceness and CPUs"
        if alike
        else (f"they differ: {argv(a)} nice {a.nice()} against {argv(b)} nice {b.nice()}")
    )


def _sentences(port: int) -> int:
    """How many story lines make about PROMPT_TOKENS tokens for this tokenizer."""
    per_line = rc.tokens(port, rc.story(20)) / 20
    return max(1, round(PROMPT_TOKENS / per_line))


def _rates(
    ctx: Context, gw: int, direct: int, sentences: int
) -> tuple[dict[str, list[float]], dict[str, list[float]]]:
    ours: dict[str, list[float]] = {"gen": [], "prompt": []}
    floor: dict[str, list[float]] = {"gen": [], "prompt": []}
    rc.generation_rate(direct, "gemma", 8)  # warm both: not counted
    rc.generation_rate(gw, "gemma", 8)
    for i in range(3):
        for port, into in ((direct, floor), (gw, ours))[:: 1 if i % 2 == 0 else -1]:
            into["gen"].append(rc.generation_rate(port, "gemma"))
            text = f"Run {i} on port {port}.\n{rc.story(sentences)}\nWho counted the ships?"
            turn = rc.first_token(port, "gemma", [{"role": "user", "content": text}], False)
            into["prompt"].append(turn.evaluated / turn.seconds)
            into.setdefault("prompt_n", []).append(float(turn.evaluated))
    return ours, floor


def _rss(pid: int | None) -> float:
    return psutil.Process(pid).memory_info().rss / 2**20 if pid else 0.0


def _rows(
    ours: dict[str, list[float]],
    floor: dict[str, list[float]],
    cold_ours: float,
    cold_direct: float,
    rss: list[float],
) -> list[Result]:
    n_prompt = round(statistics.median(ours["prompt_n"]))
    gen = Result(
        "real model: generation", 128, "tok/s", ours["gen"], floor["gen"], "ratio", "none",
        None, "-", "streamed, first token to last, median of 3 warm; floor: llama-server direct",
    )  # fmt: skip
    prompt = Result(
        "real model: prompt", n_prompt, "tok/s", ours["prompt"], floor["prompt"], "ratio",
        "none", None, "-",
        "prompt tokens / 1-token answer time, cache_prompt false and a unique first line",
    )  # fmt: skip
    cold = Result(
        "real model: cold load to 1st token", 1, "s", [cold_ours], [cold_direct], "ratio",
        "none", None, "-",
        "llamad: request to a model not loaded; floor: launch, /health every 5 ms, request",
    )  # fmt: skip
    mem = Result(
        "real model: llama-server RSS", 1, "MiB", [rss[0]], [rss[1]], "ratio", "none", None,
        "-", f"ctx 2048, after the run; llamad's daemon itself: {rss[2]:.0f} MiB",
    )  # fmt: skip
    mem.extra["llamad_daemon_rss_mib"] = round(rss[2], 1)
    return [gen, prompt, cold, mem]
