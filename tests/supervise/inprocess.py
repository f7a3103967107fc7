"""Running the supervisor in the test's own event loop, for tests/supervise/.

The Runtime is the real one; its children are the real llama-server where it can show the
behaviour, and tests/fake_llama_server.py where a fault must be switched on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import httpx
from helpers import FAKE_SERVER, until, write_config

from llamad.backends.probes import Health, Prober
from llamad.backends.quarantine import GATEKEEPER, Quarantine
from llamad.config.load import Resolved, load
from llamad.lifecycle.states import State
from llamad.supervise.instance import Instance
from llamad.supervise.runtime import Runtime
from llamad.supervise.slot_cache import SlotCache
from llamad.supervise.slot_checkpoints import Checkpoints
from llamad.supervise.supervisor import Drain, Supervisor

FAST = {
    "health_interval": 0.2,
    "health_timeout": 0.5,
    "unhealthy_after": 2,
    "start_timeout": 20.0,
    "stop_timeout": 5.0,
    "backoff_initial": 30.0,  # a failed start stays in BACKOFF while the test looks
    "backoff_max": 30.0,
}


@dataclass
class Sup:
    """A running Supervisor, its config and every probe result it saw."""

    supervisor: Supervisor
    resolved: Resolved
    probes: list[tuple[str, Health]] = field(default_factory=list)

    def __getitem__(self, name: str) -> Instance:
        return self.supervisor.instances[name]

    async def drained(self, timeout: float = 30.0) -> None:
        """Wait until no handover is under way."""
        await until(lambda: not self.supervisor.draining(), timeout, "every handover done")

    async def state(self, name: str, *states: State, timeout: float = 20.0) -> Instance:
        inst = self[name]
        assert await inst.wait_until(*states, timeout=timeout), (inst.record, states)
        return inst


def config(
    tmp: Path, instances: dict[str, dict[str, Any]], fake: bool = False, **knobs: Any
) -> Path:
    daemon: dict[str, Any] = {"state_dir": str(tmp / "state")}
    if fake:
        daemon["llama_server"] = str(FAKE_SERVER)
    path = tmp / f"llamad-{len(list(tmp.glob('llamad-*.toml')))}.toml"
    return write_config(path, instances, daemon=daemon, supervise={**FAST, **knobs})


@contextlib.asynccontextmanager
async def supervising(
    cfg: Path, draining: Drain | None = None, quarantine: Quarantine = GATEKEEPER
) -> AsyncIterator[Sup]:
    """A Supervisor over `cfg`'s instances, shut down (gracefully) on the way out;
    `draining` stands in for the gateway's drain, `quarantine` reads macOS's flag."""
    resolved = load(cfg)
    prober = Prober()
    d = resolved.daemon
    cache = SlotCache(prober.client, d.cache_max)
    runtime = Runtime(
        tools=resolved.tools,
        prober=prober,
        log_dir=d.log_dir,
        cache=cache,
        quarantine=quarantine,
    )
    drain = {} if draining is None else {"draining": draining}
    observe = lambda n, h: sup.probes.append((n, h))  # noqa: E731
    sup = Sup(Supervisor(runtime, observe_probe=observe, **drain), resolved)
    task = asyncio.create_task(sup.supervisor.run())
    try:
        await sup.supervisor.apply(resolved.instances)
        yield sup
    finally:
        await sup.supervisor.shutdown()
        await task
        await prober.aclose()


def events(logs: list[dict[str, Any]], name: str, **match: Any) -> list[dict[str, Any]]:
    return [e for e in logs if e["event"] == name and all(e.get(k) == v for k, v in match.items())]


@contextlib.asynccontextmanager
async def saving(sup: Sup, tokens: int = 16, interval: float = 30.0) -> AsyncIterator[Checkpoints]:
    """Checkpoints over `sup`'s instances, running until the block ends."""
    daemon = replace(sup.resolved.daemon, cache_save_tokens=tokens, cache_save_interval=interval)
    cache = sup.supervisor.runtime.cache
    assert cache is not None
    saves = Checkpoints(cache, sup.supervisor.instances, lambda: daemon)
    done = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        group.create_task(saves.run(done))
        try:
            yield saves
        finally:
            done.set()


async def complete(port: int, prompt: str) -> dict[str, Any]:
    """Two tokens after `prompt` at temperature 0, from the llama-server on `port`."""
    async with httpx.AsyncClient() as client:
        reply = await client.post(
            f"http://127.0.0.1:{port}/completion",
            json={"prompt": prompt, "n_predict": 2, "temperature": 0},
            timeout=30,
        )
    answer: dict[str, Any] = reply.json()
    return answer
