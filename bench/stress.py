"""Stress, one row per case of issue 22: requests sent, failed, and failures the rules allow.

The same clients and rules as the stress tests (tests/gateway/test_stress.py), through
bench/traffic.py: a request fails when the rules say it must succeed and it did not (a
502, a 429, a stream cut short or ending in an error event). A row passes with no such
failure and its case's own condition met (the instance restarted, one reload, counts
back to 0); the note says what was counted.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench.common import Context, Result, health, instance_keys, wait_for
from bench.procs import Daemon
from bench.traffic import (
    CUT,
    Ask,
    Held,
    Tally,
    Traffic,
    judge_whole,
    leave_when,
    nothing_allowed,
    ollama_generate,
    openai_chat,
    openai_long,
    until,
)
from bench.traffic import (
    run as run_traffic,
)
from llamad.client.http import Client

SETTLE_S = 10.0  # in_flight and queued must be back to 0 this soon after the traffic
STALL_S = 5  # the slow model's start, long enough to leave during it


class Gateway:
    """A llamad with a gateway in front of `instances`, for one case."""

    def __init__(
        self,
        ctx: Context,
        name: str,
        instances: dict[str, dict[str, object]],
        daemon: dict[str, object] | None = None,
        **settings: object,
    ) -> None:
        port = ctx.port()
        self.base = f"http://127.0.0.1:{port}"
        self.daemon = Daemon(
            ctx,
            name,
            instances,
            supervise={"health_interval": 0.5},
            gateway={"listen": f"127.0.0.1:{port}", **settings},
            daemon=daemon,
        )
        try:
            self.daemon.wait_socket()
            always = [n for n, keys in instances.items() if not keys.get("on_demand")]
            if always:  # (on-demand models wait for their first request)
                self.daemon.wait_running(always)
            wait_for(lambda: health(port) == 200 or None, 30.0, "the gateway answering")
        except BaseException:
            self.daemon.stop()
            raise

    def instance(self, name: str) -> dict[str, Any]:
        """One instance's status entry."""
        return dict(Client(self.daemon.socket).call("GET", f"/v1/instances/{name}"))

    def starts(self, name: str) -> int:
        """How many times `name` was started."""
        return len(self.daemon.events("instance.state_changed", instance=name, to="starting"))

    def wait_reloads(self, count: int) -> None:
        """Wait until `count` reloads were applied."""

        def applied() -> bool | None:
            return len(self.daemon.events("config.reloaded")) >= count or None

        wait_for(applied, 20.0, f"{count} reloads")

    def settled(self) -> str:
        """'' once every model's in_flight and queued are 0, else what was left (or negative)."""
        deadline = time.monotonic() + SETTLE_S
        while True:
            counts = {
                i["name"]: (i["gateway"]["in_flight"], i["gateway"]["queued"])
                for i in self.daemon.status()["instances"]
                if "gateway" in i
            }
            left = {n: c for n, c in counts.items() if c != (0, 0)}
            if not left or any(min(c) < 0 for c in left.values()):
                return f"; (in_flight, queued) left: {left}" if left else ""
            if time.monotonic() > deadline:
                return f"; (in_flight, queued) stuck: {left}"
            time.sleep(0.05)

    def __enter__(self) -> Gateway:
        return self

    def __exit__(self, *exc: object) -> None:
        self.daemon.stop()


def _row(case: str, tally: Tally, problem: str = "", info: str = "") -> Result:
    """One row: the failures the rules forbid against 0, with the counts in the note;
    `problem` (the case's own condition unmet) fails the row, `info` only informs."""
    note = (
        f"sent {tally.sent}, failed {tally.n_failed}{_kinds(tally.failed)}, "
        f"allowed {tally.n_allowed}{_kinds(tally.allowed)}, cut on purpose {tally.cut}"
    )
    return Result(
        f"stress {case}", tally.sent, "req", [float(tally.n_failed)], [0.0], "overhead", "max",
        0.0, "0 failed", note + info + problem, also_ok=not problem,
        extra={
            "sent": tally.sent, "failed": dict(tally.failed), "allowed": dict(tally.allowed),
            "cut": tally.cut, "examples": tally.examples, "problem": problem.lstrip("; "),
        },
    )  # fmt: skip


def _kinds(counts: Counter[str]) -> str:
    return f" {dict(counts)}" if counts else ""


def _keys(ctx: Context, **more: object) -> dict[str, object]:
    return {**instance_keys(ctx, ctx.port()), **more}


def thrash(ctx: Context) -> Result:
    """a. Three on-demand models, max_loaded 1, six clients streaming at random models."""
    models = ("a", "b", "c")
    instances = {m: _keys(ctx, on_demand=True) for m in models}
    with Gateway(ctx, "stress-thrash", instances, max_loaded=1) as gw:

        def pick(rng: random.Random) -> Ask:
            return openai_chat(rng.choice(models), tokens=2, stream=True)

        tally = run_traffic(gw.base, pick, clients=6, seconds=ctx.reps(8, 4))
        evictions = len(gw.daemon.events("gateway.evicted"))
        return _row("a: eviction thrash", tally, gw.settled(), f"; {evictions} evictions")


def crashes(ctx: Context) -> Result:
    """b. SIGKILL an always-on model's llama-server 5 times under two clients."""
    instances = {"x": _keys(ctx, supervise={"max_restarts": 100})}
    with Gateway(ctx, "stress-crash", instances) as gw:
        problem = ""
        with Traffic(gw.base, lambda rng: openai_chat("x"), clients=2, seconds=60.0) as traffic:
            pid: int | None = None
            try:
                for _ in range(5):
                    pid = _running_pid(gw, "x", pid)
                    _served_more(traffic, 3)
                    psutil.Process(pid).kill()
                _running_pid(gw, "x", pid)
            except TimeoutError as exc:
                problem = f"; {exc}"  # the "stuck once" lead: no restart came
        tally = traffic.join()
        began = time.monotonic()
        gw.daemon.stop()
        if gw.daemon.proc.returncode != 0 or time.monotonic() - began > 10:
            problem += f"; the daemon stopped in {time.monotonic() - began:.1f} s, "
            problem += f"exit {gw.daemon.proc.returncode}"
        return _row("b: 5 SIGKILLs", tally, problem)


def _served_more(traffic: Traffic, count: int) -> None:
    """Wait until the clients have had `count` more answers than now."""
    served = traffic.tally.ok
    wait_for(lambda: traffic.tally.ok >= served + count or None, 15.0, "answers")


def _running_pid(gw: Gateway, name: str, not_pid: int | None) -> int:
    def running() -> int | None:
        doc = gw.instance(name)
        pid = doc["pid"]
        return int(pid) if doc["state"] == "running" and pid and pid != not_pid else None

    return wait_for(running, 10.0, f"{name} running again")


def reloads(ctx: Context) -> Result:
    """c. Reloads that change x and remove then add back y, under three clients."""
    instances = {"x": _keys(ctx), "y": _keys(ctx)}
    with Gateway(ctx, "stress-reload", instances) as gw:

        def pick(rng: random.Random) -> Ask:
            return openai_chat(rng.choice(("x", "y")), tokens=4, stream=rng.random() < 0.5)

        def allow(ask: Ask, outcome: str) -> bool:
            return ask.model == "y" and outcome == "HTTP 404"  # y is gone for a while

        with Traffic(gw.base, pick, clients=3, seconds=60.0, allow=allow) as traffic:
            for n, size in enumerate((512, 256, 512, 256), start=1):
                _served_more(traffic, 3)
                now = {"x": {**instances["x"], "ctx_size": size}}
                if n % 2 == 0:
                    now["y"] = instances["y"]
                gw.daemon.rewrite(now)
                gw.wait_reloads(n)
                gw.daemon.wait_running(list(now), timeout=20.0)
        return _row("c: 4 reloads", traffic.join(), gw.settled())


def unload(ctx: Context) -> Result:
    """d. An Ollama unload while a stream runs, then five plain requests: one reload."""
    long = _keys(ctx, on_demand=True, context_shift=True)
    with Gateway(ctx, "stress-unload", {"a": long}) as gw:
        tally = Tally()
        stream = openai_long("a", tokens=400, logprobs=256)
        held = Held(gw.base, stream)
        held.start()
        held.first.wait(60)
        ask = ollama_generate("a", prompt="", stream=False, keep_alive=0)
        reply = httpx.post(gw.base + ask.path, json=ask.body, timeout=30, trust_env=False)
        tally.add(ask, judge_whole(reply.status_code, reply.content), reply.text, nothing_allowed)
        busy = gw.instance("a")["state"]
        held.go()
        held.join(90)
        tally.add(stream, held.outcome or "no end", held.detail, nothing_allowed)
        wait_for(lambda: gw.instance("a")["state"] in ("idle", "stopped") or None, 10.0, "unload")
        tally = tally.merge(run_traffic(gw.base, lambda r: openai_chat("a"), requests=5))
        problem = gw.settled()
        if busy != "running":
            problem += f"; unloaded under the stream ({busy})"
        if (starts := gw.starts("a")) != 2:
            problem += f"; {starts} loads, the rule says 2 (the first, one after the unload)"
        return _row("d: unload while busy", tally, problem)


def leaving(ctx: Context) -> Result:
    """e. Clients that leave while their model loads (max_queue 1), and streams cut."""
    slow = _keys(ctx, on_demand=True, env={"STALL_S": str(STALL_S)})
    hot = _keys(ctx, n_parallel=2, context_shift=True)
    instances = {"slow": slow, "hot": hot}
    binary: dict[str, object] = {"llama_server": _stalling_binary(ctx)}
    with Gateway(ctx, "stress-leave", instances, daemon=binary, max_queue=1) as gw:
        tally, problem = Tally(), ""
        for leaver in (openai_chat("slow"), ollama_generate("slow", stream=False)):
            asyncio.run(leave_when(gw.base, leaver, lambda: _queued(gw, "slow") == 1))
            tally.add(leaver, CUT, "", nothing_allowed)
            # Well before the load ends: the place is freed by leaving, not by the load.
            if not until(lambda: _queued(gw, "slow") == 0, 2.0):
                problem += f"; {leaver.path}: a leaver kept its queue place"
        nxt = run_traffic(gw.base, lambda r: ollama_generate("slow", stream=False), requests=1)
        tally = tally.merge(nxt)

        def cut(rng: random.Random) -> Ask:
            left = rng.randint(0, 3)
            if rng.random() < 0.5:
                return openai_chat("hot", tokens=24, stream=True, cut_after=left)
            return ollama_generate("hot", tokens=24, cut_after=left)

        tally = tally.merge(run_traffic(gw.base, cut, clients=4, seconds=ctx.reps(4, 2)))
        return _row("e: clients that leave", tally, problem + gw.settled())


def _queued(gw: Gateway, model: str) -> int:
    return int(gw.instance(model)["gateway"]["queued"])


def _stalling_binary(ctx: Context) -> Path:
    """The real llama-server behind a script that first sleeps $STALL_S seconds, when set:
    a load long enough to leave during. --help and --version answer at once (llamad reads
    its option catalogue from them)."""
    path = ctx.root / "stalling-llama-server"
    real = ctx.binary
    path.write_text(
        "#!/bin/sh\n"
        f'case "$1" in --help|--version) exec "{real}" "$@";; esac\n'
        '[ -n "$STALL_S" ] && sleep "$STALL_S"\n'
        f'exec "{real}" "$@"\n'
    )
    path.chmod(0o755)
    return path


CASES: tuple[Callable[[Context], Result], ...] = (thrash, crashes, reloads, unload, leaving)


def run(ctx: Context) -> list[Result]:
    """Every case, one daemon each."""
    return [case(ctx) for case in CASES]
