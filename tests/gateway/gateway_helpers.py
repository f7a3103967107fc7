"""A llamad with a gateway in front of real llama-servers running the tiny model."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import httpx
from helpers import FAKE_SERVER, Llamad, free_port, short_dir, wait_for, write_config

TINY = {"ctx_size": 256, "n_parallel": 1}
# Generation that lasts: context shift lets the tiny model write past its context.
LONG = {"ctx_size": 256, "n_parallel": 1, "context_shift": True}


def chat(model: str, tokens: int = 3, stream: bool = False) -> dict[str, Any]:
    """A chat completion body."""
    body: dict[str, Any] = {
        "model": model,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": tokens,
    }
    if stream:
        body["stream"] = True
    return body


class Gw:
    """The daemon and the gateway's base URL."""

    def __init__(self, ld: Llamad, base: str, dir: Path, model: Path) -> None:
        self.ld, self.base, self.dir, self.model = ld, base, dir, model

    def models(self) -> dict[str, dict[str, Any]]:
        """`/v1/models` by id."""
        data = httpx.get(f"{self.base}/v1/models", timeout=5).json()["data"]
        return {m["id"]: m for m in data}

    def state(self, name: str) -> str:
        """The instance's state as the control API has it."""
        return str(self.ld.instance(name)["state"])

    def starts(self, name: str) -> int:
        """How many times `name` was started."""
        return len(self.ld.events("instance.state_changed", instance=name, to="starting"))


@contextmanager
def gateway(
    model: Path,
    instances: dict[str, dict[str, Any]],
    env: dict[str, str] | None = None,
    daemon: dict[str, Any] | None = None,
    supervise: dict[str, Any] | None = None,
    preexec_fn: Callable[[], None] | None = None,
    host: str = "127.0.0.1",
    **settings: Any,
) -> Iterator[Gw]:
    """Run llamad with `instances` (llamad picks ports) and `[gateway]` `settings`, the
    gateway listening on `host` (`preexec_fn` runs in the daemon's process before it
    starts: a low ulimit, say)."""
    d = short_dir()
    port = free_port()
    tables = {n: {"model": model, "port": free_port(), **keys} for n, keys in instances.items()}
    cfg = write_config(
        d / "llamad.toml",
        tables,
        daemon={"state_dir": str(d / "state"), **(daemon or {})},
        supervise={"health_interval": 0.5, **(supervise or {})},
        gateway={"listen": f"{host}:{port}", **settings},
    )
    with Llamad(cfg, env, preexec_fn) as ld:
        ld.wait_ready()
        ld.wait_event("gateway.listening")
        for name, keys in instances.items():
            if not keys.get("on_demand"):
                ld.wait_running(name)
        gw = Gw(ld, f"http://127.0.0.1:{port}", d, model)
        wait_for(lambda: _answers(gw.base), 10, "the gateway answering")
        yield gw
        assert ld.stop() == 0


def fake_gateway(
    model: Path, llama_server: Path, instances: dict[str, dict[str, Any]], **settings: Any
) -> AbstractContextManager[Gw]:
    """`gateway`, with the fake llama-server (tests/fake_llama_server.py) in place of the
    real one for faults it cannot show, a slow load say; its --help is the real one's."""
    return gateway(
        model,
        instances,
        env={"FAKE_REAL_SERVER": str(llama_server)},
        daemon={"llama_server": str(FAKE_SERVER)},
        **settings,
    )


def _answers(base: str) -> bool:
    try:
        return httpx.get(f"{base}/health", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


@contextmanager
def follow_events(base: str, until: Callable[[set[tuple[str, Any]]], bool]) -> Iterator[list[Any]]:
    """Read `/v1/events` in a thread into the list yielded, until `until` holds for the
    (type, phase or state or reason) pairs seen; joined on the way out."""
    seen: list[dict[str, Any]] = []
    opened = threading.Event()

    def read() -> None:
        with httpx.stream("GET", f"{base}/v1/events", timeout=20) as r:
            assert r.headers["content-type"].startswith("text/event-stream")
            for line in r.iter_lines():
                opened.set()
                if line.startswith("data: "):
                    seen.append(json.loads(line[6:]))
                    if until(event_kinds(seen)):
                        return

    reader = threading.Thread(target=read)
    reader.start()
    try:
        wait_for(opened.is_set, 5, "the stream open")
        yield seen
    finally:
        reader.join(20)


def event_kinds(seen: list[dict[str, Any]]) -> set[tuple[str, Any]]:
    """Each event's type with its phase, new state or reason (None: it has none)."""
    return {(e["type"], e.get("phase") or e.get("to") or e.get("reason")) for e in seen}
