"""Stress under contention (issue 22), end to end: a real llamad, real llama-servers
running the tiny model, and clients sending traffic for a few seconds at a time.

Each test states the rule it checks: which requests must succeed, which failures are
allowed. After each, the gateway's counts (`in_flight`, `queued`) go back to 0 and none
is ever negative; the autouse fixture checks that no process is left behind.
"""

from __future__ import annotations

import asyncio
import random
import time
import tomllib
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from gateway_helpers import LONG, TINY, Gw, gateway
from helpers import stand_in_binary, wait_for
from test_reload_gateway import _toml

from bench.traffic import (
    OK,
    Ask,
    Held,
    Traffic,
    leave_when,
    ollama_generate,
    openai_chat,
    openai_long,
    run,
)

LAZY = {**TINY, "on_demand": True}
SETTLE_S = 10.0  # counts must be back to 0 this soon after the traffic ends


def _settled(gw: Gw) -> None:
    """Wait until every model's in-flight and queued counts are 0; none may go negative."""

    def zero() -> bool:
        counts = {
            i["name"]: (i["gateway"]["in_flight"], i["gateway"]["queued"])
            for i in gw.ld.status()["instances"]
            if "gateway" in i
        }
        negative = {n: c for n, c in counts.items() if min(c) < 0}
        assert not negative, f"negative (in_flight, queued): {negative}"
        return all(c == (0, 0) for c in counts.values())

    wait_for(zero, SETTLE_S, "every model's in_flight and queued back to 0")


def _pid_running(gw: Gw, name: str, not_pid: int | None, timeout: float = 10.0) -> int:
    """The pid of `name` once the status document says it runs, with a pid not `not_pid`."""

    def running() -> int | None:
        doc = gw.ld.instance(name)
        pid = doc["pid"]
        return pid if doc["state"] == "running" and pid and pid != not_pid else None

    return int(wait_for(running, timeout, f"{name} running again (not pid {not_pid})"))


def _served_more(traffic: Traffic, count: int, what: str) -> None:
    """Wait until the clients have had `count` more answers than now."""
    served = traffic.tally.ok
    wait_for(lambda: traffic.tally.ok >= served + count, 15, what)


@pytest.mark.timeout(90)
def test_eviction_thrash_loses_no_stream(tiny_model: Path) -> None:
    """Three on-demand models, room for one, six clients streaming at random models:
    every stream ends with [DONE], none with a 502 or an error event."""
    models = ("a", "b", "c")
    with gateway(tiny_model, dict.fromkeys(models, LAZY), max_loaded=1) as gw:

        def pick(rng: random.Random) -> Ask:
            return openai_chat(rng.choice(models), tokens=2, stream=True)

        tally = run(gw.base, pick, clients=6, seconds=8.0)
        assert tally.sent >= 10, tally
        assert tally.n_failed == 0, tally
        assert len(gw.ld.events("gateway.evicted")) >= 3  # it did thrash
        _settled(gw)


@pytest.mark.timeout(90)
def test_sigkills_under_traffic_lose_no_request(tiny_model: Path) -> None:
    """SIGKILL an always-on model's llama-server five times under two steady clients: the
    gateway holds what the crash refused and sends it to the new process. The instance ends
    running (each restart happened) and the daemon stops cleanly."""
    # The flap guard's default (5 restarts) is not what is tested here.
    crashy = {**TINY, "supervise": {"max_restarts": 100}}
    with gateway(tiny_model, {"x": crashy}) as gw:
        # One client speaks OpenAI, the other Ollama: both resend the same way.
        asks = (openai_chat("x"), ollama_generate("x", stream=False))
        traffic = Traffic(gw.base, lambda rng: rng.choice(asks), clients=2, seconds=60.0)
        with traffic:
            pid: int | None = None
            for kill in range(5):
                pid = _pid_running(gw, "x", not_pid=pid)
                _served_more(traffic, 3, f"answers from pid {pid} before kill {kill + 1}")
                psutil.Process(pid).kill()
            _pid_running(gw, "x", not_pid=pid)  # the last crash was restarted too
            _served_more(traffic, 3, "answers after the last restart")
        tally = traffic.join()
        assert len(gw.ld.events("instance.exited", instance="x")) >= 5
        _settled(gw)
        began = time.monotonic()
        assert gw.ld.stop(timeout=15) == 0
        assert time.monotonic() - began < 10, "the daemon took too long to stop"
        assert tally.n_failed == 0, tally


def _reload(gw: Gw, count: int, edit: Any) -> None:
    """Edit the config's instances, save it as an editor does, and wait for the reload."""
    doc = tomllib.loads(gw.ld.config.read_text())
    edit(doc["instances"])
    tmp = gw.ld.config.with_suffix(".new")
    tmp.write_text(_toml(doc))
    tmp.replace(gw.ld.config)
    gw.ld.wait_event("config.reloaded", count=count, timeout=20)


@pytest.mark.timeout(90)
def test_reloads_that_change_and_remove_models_under_traffic(tiny_model: Path) -> None:
    """Reloads change x (held through its restart: never fails) and remove y then add it
    back (404 while it is gone, never 502/503 or a cut stream), under three clients."""
    with gateway(tiny_model, {"x": TINY, "y": TINY}) as gw:
        y_keys = tomllib.loads(gw.ld.config.read_text())["instances"]["y"]

        def pick(rng: random.Random) -> Ask:
            return openai_chat(rng.choice(("x", "y")), tokens=4, stream=rng.random() < 0.5)

        def allow(ask: Ask, outcome: str) -> bool:
            return ask.model == "y" and outcome == "HTTP 404"

        traffic = Traffic(gw.base, pick, clients=3, seconds=60.0, allow=allow)
        with traffic:
            for n, ctx_size in enumerate((512, 256, 512, 256), start=1):
                _served_more(traffic, 3, f"answers before reload {n}")
                gone = n % 2 == 1

                def edit(inst: dict[str, Any], size: int = ctx_size, gone: bool = gone) -> None:
                    inst["x"]["ctx_size"] = size
                    if gone:
                        del inst["y"]
                    else:
                        inst["y"] = y_keys

                _reload(gw, n, edit)
                wait_for(lambda: gw.state("x") == "running", 15, "x running after the reload")
                if not gone:
                    wait_for(lambda: gw.state("y") == "running", 15, "y back")
            _served_more(traffic, 3, "answers after the last reload")
        tally = traffic.join()
        assert tally.n_failed == 0, tally
        _settled(gw)


@pytest.mark.timeout(120)
def test_an_ollama_unload_while_busy_happens_once(tiny_model: Path) -> None:
    """`keep_alive: 0` while a stream runs: the stream completes, the model unloads once
    after it, and later plain requests do not unload it after each one."""
    with gateway(tiny_model, {"a": {**LONG, "on_demand": True}}) as gw:
        held = Held(gw.base, openai_long("a", tokens=400, logprobs=256))
        held.start()
        assert held.first.wait(60)
        unload = {"model": "a", "prompt": "", "keep_alive": 0}
        reply = httpx.post(f"{gw.base}/api/generate", json=unload, timeout=30)
        assert reply.status_code == 200, reply.text
        assert gw.state("a") == "running"  # busy: not unloaded under the stream
        held.go()
        held.join(90)
        assert held.outcome == OK, (held.outcome, held.detail)
        wait_for(lambda: gw.state("a") in ("idle", "stopped"), 10, "a unloaded after its stream")
        assert len(gw.ld.events("instance.idle_stopped", instance="a")) == 1
        tally = run(gw.base, lambda rng: openai_chat("a"), clients=1, requests=5, seconds=30.0)
        assert (tally.ok, tally.n_failed) == (5, 0), tally
        # The first load, and one for the requests after the unload: not one per request.
        assert gw.starts("a") == 2, f"{gw.starts('a')} starts"
        assert gw.ld.instance("a")["gateway"]["idle_timeout_s"] == 600.0  # the unload is over
        _settled(gw)


def _queued(gw: Gw, model: str) -> int:
    return int(gw.ld.instance(model)["gateway"]["queued"])


@pytest.mark.timeout(90)
def test_clients_that_leave_during_a_load_hold_no_queue_place(
    tiny_model: Path, llama_server: Path, tmp_path: Path
) -> None:
    """With max_queue = 1, clients (OpenAI, then Ollama) that hang up while their model
    loads free their place: the next client is served, not refused 429."""
    binary = tmp_path / "llama-server"
    # A real llama-server that takes STALL_S seconds to begin: time to leave during a load.
    stall = '[ -n "$STALL_S" ] && sleep "$STALL_S"'
    stand_in_binary(binary, llama_server, serve=f'{stall}\nexec "{llama_server}" "$@"')
    slow = {**LAZY, "env": {"STALL_S": "5"}}
    daemon = {"llama_server": str(binary)}
    with gateway(tiny_model, {"slow": slow}, daemon=daemon, max_queue=1) as gw:
        for leaver in (openai_chat("slow"), ollama_generate("slow", stream=False)):
            queued = asyncio.run(leave_when(gw.base, leaver, lambda: _queued(gw, "slow") == 1))
            assert queued, f"{leaver.path} never queued"
            # Well before the load ends: the place is freed by leaving, not by the load.
            wait_for(lambda: _queued(gw, "slow") == 0, 2.0, f"{leaver.path} leaver's place freed")
            assert gw.state("slow") == "starting"
        tally = run(gw.base, lambda rng: ollama_generate("slow", stream=False), requests=1)
        assert (tally.ok, tally.n_failed) == (1, 0), tally
        assert gw.starts("slow") == 1
        _settled(gw)


@pytest.mark.timeout(60)
def test_streams_cut_mid_way_leave_nothing_in_flight(tiny_model: Path) -> None:
    """Four clients for 4 s, each leaving its stream (OpenAI or Ollama) after 0-3 lines:
    the streams nobody cut complete, and nothing stays in flight."""
    with gateway(tiny_model, {"hot": {**LONG, "n_parallel": 2}}) as gw:

        def cut(rng: random.Random) -> Ask:
            left = rng.randint(0, 3)
            if rng.random() < 0.5:
                return openai_chat("hot", tokens=24, stream=True, cut_after=left)
            return ollama_generate("hot", tokens=24, cut_after=left)

        tally = run(gw.base, cut, clients=4, seconds=4.0)
        assert tally.cut >= 10, tally
        assert tally.n_failed == 0, tally
        _settled(gw)
        whole = run(gw.base, lambda rng: openai_chat("hot", tokens=8, stream=True), requests=2)
        assert whole.ok == 2, whole
