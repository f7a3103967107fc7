"""Loads, eviction and idle stops for the gateway's models, one slot per instance.

One load serves every waiter of a model; loads decide on room one at a time (so two
cannot both take the last place), then wait for readiness side by side. A waiter that
leaves takes its place in the queue with it, and a load nobody waits for any more is
cancelled before it evicts anything.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import structlog

from llamad.config.gateway_table import Gateway as Settings
from llamad.gateway import memory
from llamad.gateway.metrics import GatewayMetrics
from llamad.gateway.port import LoadFailed, QueueFull, QueueTimeout, Unavailable
from llamad.gateway.room import Loaded, plan
from llamad.lifecycle.states import Start, State, Stop
from llamad.supervise.facts import Facts
from llamad.supervise.supervisor import Supervisor

log = structlog.get_logger("llamad.gateway")

LIVE = (State.STARTING, State.RUNNING, State.BACKOFF, State.STOPPING)
_SETTLED = (State.RUNNING, State.BACKOFF, State.FAILED, State.STOPPED, State.IDLE)
TICK_S = 0.5  # idle timers and footprints are checked this often
POLL_S = 0.25  # a wait for room also looks again this often (memory frees outside us)


@dataclass
class Slot:
    """What the gateway tracks for one model."""

    in_flight: int = 0
    waiting: int = 0
    last_used: float = 0.0  # monotonic
    keep_alive: float | None = None  # a request's override of idle_timeout
    expires: float | None = None  # monotonic time of the idle stop, when armed
    load: asyncio.Task[None] | None = None
    deciding: bool = False  # the load waits for room: cancelled when nobody waits
    stopping: bool = False  # being evicted, idle-stopped or drained: do not hand out
    measured: int | None = None  # its footprint when last seen running
    tasks: set[asyncio.Task[None]] = field(default_factory=set)

    @property
    def busy(self) -> bool:
        """Requests in flight or waiting, or a load under way."""
        return bool(self.in_flight or self.waiting or self.load)


class Scheduler:
    """Owns the slots; `run()` is the idle ticker."""

    def __init__(
        self,
        supervisor: Supervisor,
        settings: Callable[[], Settings],
        metrics: GatewayMetrics | None = None,
    ) -> None:
        self.sup = supervisor
        self.settings = settings
        self.metrics = metrics or GatewayMetrics()
        self.slots: dict[str, Slot] = {}
        self._room = asyncio.Lock()
        self._changed = asyncio.Event()
        # Set by the idle timers: the last request of a model ended.
        self.after_last: Callable[[str], None] = lambda name: None

    def slot(self, name: str) -> Slot:
        """The slot of `name`, made on first use."""
        return self.slots.setdefault(name, Slot())

    def poke(self) -> None:
        """Something that frees room or ends a wait happened: wake whoever waits."""
        self._changed.set()
        self._changed = asyncio.Event()

    async def changed(self, timeout: float = POLL_S) -> None:
        """Wait for the next poke, at most `timeout` seconds."""
        waiter = asyncio.ensure_future(self._changed.wait())
        try:
            await asyncio.wait({waiter}, timeout=timeout)
        finally:
            waiter.cancel()

    # Requests ------------------------------------------------------------------

    async def ready(self, facts: Facts) -> None:
        """Return once `facts.name` serves requests: load it (on demand) or wait for it.

        Raises QueueFull, QueueTimeout, LoadFailed or Unavailable."""
        name, slot = facts.name, self.slot(facts.name)
        if facts.state is State.RUNNING and not slot.stopping:
            return
        cfg = self.settings()
        if slot.waiting >= cfg.max_queue:
            raise QueueFull(f"{slot.waiting} requests already wait for model {name!r}")
        slot.waiting += 1
        try:
            async with asyncio.timeout(cfg.queue_timeout):
                await self._until_running(name, slot)
        except TimeoutError:
            raise QueueTimeout(
                f"model {name!r} was not ready within {cfg.queue_timeout:g}s"
            ) from None
        finally:
            slot.waiting -= 1
            if not slot.waiting and slot.deciding and slot.load is not None:
                slot.load.cancel()  # nobody wants it any more: evict nothing for it

    async def _until_running(self, name: str, slot: Slot) -> None:
        while True:
            facts = self.sup.facts(name)
            if facts is None or facts.closing:
                raise Unavailable(f"model {name!r} is being removed")
            if facts.state is State.RUNNING and not slot.stopping:
                return
            if slot.stopping or facts.state is State.STOPPING:
                await self._changes(name, facts.state)
            elif facts.spec.on_demand:
                if slot.load is None:
                    slot.load = asyncio.create_task(self._load(name, slot), name=f"load-{name}")
                    slot.load.add_done_callback(_retrieve)
                load = slot.load
                try:
                    await asyncio.shield(load)
                except asyncio.CancelledError:
                    # The load was cancelled for want of waiters just before we came:
                    # start another, unless it is this request that is being cancelled.
                    if load.cancelled() and not _cancelling():
                        continue
                    raise
            elif facts.state in (State.STOPPED, State.IDLE, State.FAILED):
                raise Unavailable(f"model {name!r} is not served: {facts.reason()}")
            else:  # an always-on instance on its way up: wait for it
                await self._changes(name, facts.state)

    async def _changes(self, name: str, state: State) -> None:
        """Wait until `name` leaves `state` or the gateway pokes, at most POLL_S."""
        others = [s for s in State if s is not state]
        waiter = asyncio.ensure_future(self._changed.wait())
        moved = asyncio.ensure_future(self.sup.wait_for(name, *others, timeout=POLL_S))
        try:
            await asyncio.wait({waiter, moved}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
            moved.cancel()

    def began(self, name: str, keep_alive: float | None) -> None:
        """A request is in flight: no idle stop, no eviction until it ends."""
        slot = self.slot(name)
        slot.in_flight += 1
        slot.last_used = time.monotonic()
        slot.expires = None
        if keep_alive is not None:
            slot.keep_alive = keep_alive

    def ended(self, name: str) -> None:
        """A request ended: the idle timer starts from now."""
        slot = self.slot(name)
        slot.in_flight -= 1
        slot.last_used = time.monotonic()
        if not slot.in_flight:
            self.after_last(name)
            self.poke()

    # Loads and room ------------------------------------------------------------

    async def _load(self, name: str, slot: Slot) -> None:
        t0 = time.monotonic()
        log.info("gateway.load_requested", model=name, waiting=slot.waiting)
        try:
            slot.deciding = True
            async with self._room:
                await self._make_room(name)
                slot.deciding = False
                await self.sup.command(name, Start())
            spec = self.sup.facts(name)
            timeout = (spec.spec.knobs.start_timeout if spec else 0) + 5
            await self.sup.wait_for(name, *_SETTLED, timeout=timeout)
            facts = self.sup.facts(name)
            if facts is None or facts.state is not State.RUNNING:
                reason = facts.reason() if facts else "removed from the config"
                # An on-demand model that cannot start does not retry in the background:
                # the next request tries again, and gets the reason if it fails again.
                await self.sup.command(name, Stop())
                log.warning("gateway.load_failed", model=name, reason=reason)
                self.metrics.loads.labels(name, "failed").inc()
                raise LoadFailed(name, reason)
            self.metrics.loads.labels(name, "ok").inc()
            self.metrics.load_seconds.labels(name).observe(time.monotonic() - t0)
            log.info("gateway.loaded", model=name, seconds=round(time.monotonic() - t0, 3))
        except asyncio.CancelledError:
            log.info("gateway.load_cancelled", model=name)
            self.metrics.loads.labels(name, "cancelled").inc()
            raise
        finally:
            slot.deciding = False
            slot.load = None
            self.poke()

    async def _make_room(self, name: str) -> None:
        cfg = self.settings()
        while True:
            need = self.size(name) or 0
            loaded = self._loaded(exclude=name)
            victims = plan(need, loaded, cfg.max_loaded, self._budget(loaded))
            if victims is not None:
                await asyncio.gather(*(self.stop(v, "gateway.evicted") for v in victims))
                return
            await self.changed()

    def _loaded(self, exclude: str) -> list[Loaded]:
        out = []
        for n in self.sup.names():
            facts = self.sup.facts(n)
            if n == exclude or facts is None or facts.state not in LIVE:
                continue
            slot = self.slot(n)
            out.append(
                Loaded(n, self.size(n) or 0, facts.spec.on_demand, slot.busy, slot.last_used)
            )
        return out

    def _budget(self, loaded: list[Loaded]) -> int | None:
        budget = self.settings().memory_budget
        if budget != "auto":
            return budget
        held = sum(self.slot(m.name).measured or 0 for m in loaded)
        total = memory.available() + held
        return total - memory.margin(total)

    def size(self, name: str) -> int | None:
        """The measured footprint of `name` once it has run, else its estimate."""
        facts = self.sup.facts(name)
        measured = self.slot(name).measured
        if measured is not None or facts is None:
            return measured
        return memory.estimate(facts.spec)

    async def stop(self, name: str, event: str) -> None:
        """Stop `name` to IDLE (an eviction or an idle stop) and wait until it is down."""
        slot = self.slot(name)
        facts = self.sup.facts(name)
        if facts is None or slot.stopping:
            return
        slot.stopping = True
        slot.expires = None
        try:
            log.info(event, instance=name, model=name, size_bytes=self.size(name))
            counter = self.metrics.evictions if event == "gateway.evicted" else None
            (counter or self.metrics.idle_stops).labels(name).inc()
            await self.sup.command(name, Stop(idle=True))
            timeout = facts.spec.knobs.stop_timeout + 5
            await self.sup.wait_for(name, State.IDLE, State.STOPPED, State.FAILED, timeout=timeout)
        finally:
            slot.stopping = False
            self.poke()

    async def unload(self, name: str) -> None:
        """Stop `name` now if nothing is in flight, else once the last request ends."""
        slot = self.slot(name)
        if slot.in_flight or slot.waiting:
            slot.keep_alive = 0.0
            return
        await self.stop(name, "instance.idle_stopped")

    def spawn(self, slot: Slot, coro: object) -> None:
        """Run `coro` for `slot` in the background; close() cancels it."""
        task: asyncio.Task[None] = asyncio.create_task(coro)  # type: ignore[arg-type]
        slot.tasks.add(task)
        task.add_done_callback(slot.tasks.discard)

    def counts(self) -> dict[str, tuple[int, int]]:
        """(in flight, waiting) by model, for the gauges and the status document."""
        return {n: (s.in_flight, s.waiting) for n, s in self.slots.items()}

    async def close(self) -> None:
        """Cancel loads and stops under way (shutdown)."""
        tasks = [t for s in self.slots.values() for t in (*s.tasks, s.load) if t is not None]
        for task in tasks:
            task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await asyncio.gather(*tasks, return_exceptions=True)


def _cancelling() -> bool:
    task = asyncio.current_task()
    return task is not None and task.cancelling() > 0


def _retrieve(task: asyncio.Task[None]) -> None:
    # Every waiter sees the outcome through shield(); this keeps asyncio from warning
    # about a failed load nobody waited for.
    if not task.cancelled():
        task.exception()
