"""A stand-in gateway with REAL llama-servers, and the Ollama routes served over it.

It implements the Ollama layer's `Gateway` Protocol as simply as the contract allows: a
model is one llama-server (tiny model, embeddings on) started on its first lease when it is
on demand; keep_alive 0 stops it when its last lease ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx
from helpers import free_port, health, wait_for
from stand_ins import ServerThread

from llamad.backends.prompt import PromptDefaults
from llamad.backends.serving import Serving
from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.access.door import Door
from llamad.gateway.access.limits import GatewayLimits
from llamad.gateway.access.table import Table
from llamad.gateway.contract.caller import Caller
from llamad.gateway.contract.port import Asking, LoadFailed, UnknownModel
from llamad.gateway.models.tags import meant
from llamad.gateway.ollama import ollama_routes
from llamad.listener.tcp import serve_tcp
from llamad.upstream.pool import Pool


@dataclass(frozen=True)
class View:
    """The gateway's ModelView, field for field."""

    name: str
    aliases: tuple[str, ...]
    model_path: Path | None
    state: str
    loaded: bool
    on_demand: bool
    idle_timeout: float
    expires_at: float | None
    size_bytes: int | None
    ctx_size: int | None
    mmproj: bool
    host: str | None = None
    serving: Serving = field(default_factory=Serving)
    instances: tuple[str, ...] = ()
    prompt: PromptDefaults | None = None


@dataclass(frozen=True)
class Up:
    """The gateway's Upstream."""

    base_url: str
    headers: dict[str, str]
    name: str
    host: str | None = None
    answer_name: str | None = None
    model_path: Path | None = None
    pid: int | None = None
    prompt: PromptDefaults | None = None


@dataclass
class Slot:
    """One model: its view, its llama-server and who holds it."""

    view: View
    proc: subprocess.Popen[bytes] | None = None
    port: int = 0
    in_flight: int = 0
    keep_alive: float | None = None
    leases: list[float | None] = field(default_factory=list)
    fails: bool = False


class DoubleGateway:
    """The Gateway Protocol over real llama-server processes."""

    def __init__(self, binary: Path, model: Path) -> None:
        self.binary = binary
        self.model = model
        self.slots: dict[str, Slot] = {}
        self._lock = asyncio.Lock()

    def add(
        self,
        name: str,
        *,
        aliases: tuple[str, ...] = (),
        on_demand: bool = False,
        fails: bool = False,
    ) -> None:
        """Configure a model (not started yet); one that `fails` never loads."""
        view = View(
            name=name,
            aliases=aliases,
            model_path=self.model,
            state="stopped",
            loaded=False,
            on_demand=on_demand,
            idle_timeout=300.0 if on_demand else 0.0,
            expires_at=None,
            size_bytes=None,
            ctx_size=2048,
            mmproj=False,
            serving=Serving(embeddings=True, ctx_per_request=2048),
        )
        self.slots[name] = Slot(view, fails=fails)

    def models(self, caller: Caller) -> list[View]:
        return [s.view for s in self.slots.values() if caller.may_use(s.view.name)]

    def instances(self, name: str) -> tuple[str, ...] | None:
        view = self.find(name)
        return None if view is None else (view.name,)

    def find(self, name: str) -> View | None:
        name = meant(name, lambda n: self._find(n) is not None)
        return self._find(name)

    def _find(self, name: str) -> View | None:
        for slot in self.slots.values():
            if name == slot.view.name or name in slot.view.aliases:
                return slot.view
        return None

    def _spawn(self, name: str) -> Slot:
        slot = self.slots[name]
        slot.port = free_port()
        slot.proc = subprocess.Popen(
            [
                str(self.binary),
                "-m",
                str(self.model),
                "--port",
                str(slot.port),
                "-c",
                "2048",
                "--embeddings",
                "--pooling",
                "mean",
                # Generation that lasts (num_predict -1): the tiny model writes past its context.
                "--context-shift",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        return slot

    def _ready(self, slot: Slot) -> None:
        size = self.model.stat().st_size
        slot.view = replace(slot.view, state="running", loaded=True, size_bytes=size)

    def start_now(self, name: str) -> None:
        """Start an always-on model before serving, as the daemon does at boot."""
        slot = self._spawn(name)
        wait_for(lambda: health(slot.port) == 200, 30, f"{name} ready")
        self._ready(slot)

    async def start(self, name: str) -> None:
        """Start the model's llama-server and wait until /health says ready."""
        slot = self._spawn(name)
        assert slot.proc is not None
        deadline = time.monotonic() + 30
        async with httpx.AsyncClient() as client:
            while True:
                with contextlib.suppress(httpx.HTTPError):
                    r = await client.get(f"http://127.0.0.1:{slot.port}/health", timeout=1)
                    if r.status_code == 200:
                        break
                assert slot.proc.poll() is None, "llama-server exited while loading"
                assert time.monotonic() < deadline, "llama-server did not become ready"
                await asyncio.sleep(0.05)
        self._ready(slot)

    @contextlib.asynccontextmanager
    async def lease(
        self, name: str, *, keep_alive: float | None = None, asking: Asking | None = None
    ) -> AsyncIterator[Up]:
        view = self.find(name)
        if view is None:
            raise UnknownModel(name, sorted(self.slots))
        slot = self.slots[view.name]
        slot.leases.append(keep_alive)
        if slot.fails:
            raise LoadFailed(name, "exit 1")
        async with self._lock:
            if slot.proc is None:
                await self.start(view.name)
        slot.in_flight += 1
        if keep_alive is not None:
            slot.keep_alive = keep_alive
        try:
            yield Up(f"http://127.0.0.1:{slot.port}", {}, view.name)
        finally:
            slot.in_flight -= 1
            ka = slot.keep_alive
            expires = None if ka is None or ka < 0 else time.time() + ka
            slot.view = replace(slot.view, expires_at=expires)
            if ka == 0 and slot.in_flight == 0:
                await self.unload(view.name)

    def running(self, name: str) -> Up | None:
        slot = self.slots.get(name)
        if slot is None or slot.proc is None or not slot.view.loaded:
            return None
        return Up(f"http://127.0.0.1:{slot.port}", {}, name, pid=slot.proc.pid)

    async def restarted(self, upstream: Up) -> Up | None:
        return None  # the double's processes are never restarted under a request

    async def unload(self, name: str) -> None:
        slot = self.slots[name]
        self.stop(slot)
        slot.view = replace(slot.view, state="idle", loaded=False, expires_at=None)

    @staticmethod
    def stop(slot: Slot) -> None:
        """Stop the slot's llama-server, if it runs."""
        if slot.proc is not None:
            slot.proc.terminate()
            try:
                slot.proc.wait(10)
            except subprocess.TimeoutExpired:
                slot.proc.kill()
                slot.proc.wait(5)
            slot.proc = None

    def close(self) -> None:
        """Stop every llama-server."""
        for slot in self.slots.values():
            self.stop(slot)


class OllamaServer(ServerThread):
    """The Ollama routes over a DoubleGateway, behind the door, served on a free port as
    the daemon serves."""

    def __init__(self, gateway: DoubleGateway) -> None:
        self.gateway = gateway
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__("the Ollama routes")

    async def serve(self, shutdown: asyncio.Event) -> None:
        pool = Pool()
        try:
            cfg = GatewayConfig(host="127.0.0.1", port=self.port)
            table = Table(ollama_routes(self.gateway, pool))
            app = Door(table, self.gateway, lambda: cfg, GatewayLimits(lambda: cfg, dict))
            await serve_tcp(app, "127.0.0.1", self.port, shutdown, self.bound.set)
        finally:
            await pool.close()
        self.gateway.close()
