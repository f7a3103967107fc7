"""A deterministic stand-in for the supervisor, as the gateway sees it (`SupervisorView`).

States move only when the test moves them (or, with `auto`, at once on a command), so a
test decides exactly which task sees what. Every command is recorded with the requests
the test had inside a lease at that moment, to catch a stop sent while one was running.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llamad.backends.spec import InstanceSpec
from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.books.activity import Tally
from llamad.gateway.core import Gateway
from llamad.lifecycle.states import Start, State, Stop
from llamad.supervise.facts import Facts

_pids = itertools.count(1000)


def spec(name: str, *, on_demand: bool = True, idle_timeout: float = 600.0) -> InstanceSpec:
    """An instance with no model file: its size is 0, so only `max_loaded` evicts."""
    return InstanceSpec(
        name=name, host="127.0.0.1", port=9, model=None, settings=(), args=(), env=(),
        on_demand=on_demand, idle_timeout=idle_timeout,
    )  # fmt: skip


@dataclass(frozen=True)
class Asked:
    """A request as the door passes it to a lease (`contract.port.Asking`, met by
    `access.call.Call`): its body, its affinity and the gateway that relayed it."""

    doc: object = None
    affinity: bool = True
    relayed: str | None = None
    tally: Tally | None = None


@dataclass
class Inst:
    spec: InstanceSpec
    state: State = State.STOPPED
    pid: int | None = None
    closing: bool = False
    retiring: bool = False  # a reload removed it and it still drains


@dataclass
class Double:
    """Instances by name; with `auto` a Start or Stop completes at once, else it only
    begins (STARTING, STOPPING) and the test completes it."""

    auto: bool = True
    insts: dict[str, Inst] = field(default_factory=dict)
    commands: list[tuple[str, str, int]] = field(default_factory=list)  # name, event, inside
    inside: dict[str, int] = field(default_factory=dict)  # the test's own count per model
    on_names: Callable[[], None] | None = None  # a hook into the gateway's planning
    broken: set[str] = field(default_factory=set)  # a Start of these fails at once
    dead: set[int] = field(default_factory=set)  # processes killed, maybe not yet seen gone
    _moved: asyncio.Event = field(default_factory=asyncio.Event)

    def add(self, s: InstanceSpec, state: State = State.STOPPED) -> None:
        self.insts[s.name] = Inst(s)
        self.move(s.name, state)

    def remove(self, name: str) -> None:
        self.insts.pop(name)
        self._wake()

    def move(self, name: str, state: State) -> None:
        """Put `name` in `state`, with a new process when it becomes running."""
        inst = self.insts[name]
        if state in (State.STARTING, State.RUNNING) and inst.pid is None:
            inst.pid = next(_pids)
        if state not in (State.STARTING, State.RUNNING, State.STOPPING):
            inst.pid = None
        inst.state = state
        self._wake()

    def kill(self, name: str) -> None:
        """The process dies; the supervisor sees its exit only when the test `crash`es it."""
        pid = self.insts[name].pid
        assert pid is not None
        self.dead.add(pid)

    def crash(self, name: str) -> None:
        """The process died and the supervisor restarts it at once."""
        self.kill(name)
        self.insts[name].pid = None
        self.move(name, State.STARTING)

    def stops(self) -> list[tuple[str, str, int]]:
        return [c for c in self.commands if c[1].startswith("Stop")]

    def _wake(self) -> None:
        self._moved.set()
        self._moved = asyncio.Event()

    # SupervisorView ------------------------------------------------------------------

    def names(self) -> list[str]:
        if self.on_names is not None:
            hook, self.on_names = self.on_names, None
            hook()
        return list(self.insts)

    def facts(self, name: str) -> Facts | None:
        inst = self.insts.get(name)
        if inst is None:
            return None
        return Facts(inst.spec, inst.state, inst.pid, None, (), inst.closing, inst.retiring)

    async def command(self, name: str, event: Start | Stop) -> None:
        what = f"Stop(idle={event.idle})" if isinstance(event, Stop) else "Start"
        self.commands.append((name, what, self.inside.get(name, 0)))
        inst = self.insts.get(name)
        if inst is None:
            return
        # As the instance task takes a command in: the move begins; `auto` completes it.
        if isinstance(event, Start) and name in self.broken:
            self.move(name, State.FAILED)
        elif isinstance(event, Start) and inst.state is not State.RUNNING:
            self.move(name, State.RUNNING if self.auto else State.STARTING)
        elif isinstance(event, Stop):
            down = State.IDLE if event.idle else State.STOPPED
            self.move(name, down if self.auto else State.STOPPING)

    async def wait_for(self, name: str, *states: State, timeout: float) -> bool:
        try:
            async with asyncio.timeout(timeout):
                while (inst := self.insts.get(name)) is None or inst.state not in states:
                    if inst is None:
                        return False
                    await self._moved.wait()
        except TimeoutError:
            return False
        return True

    async def still_serves(self, name: str, pid: int) -> bool:
        inst = self.insts.get(name)
        return inst is not None and inst.pid == pid and pid not in self.dead


def gateway(double: Double, **settings: Any) -> Gateway:
    """A gateway over `double`; `settings` are `[gateway]` keys."""
    cfg = GatewayConfig(host="127.0.0.1", port=0, **{"memory_budget": None, **settings})
    return Gateway(double, lambda: cfg)


async def until(check: Callable[[], bool], what: str, timeout: float = 5.0) -> None:
    """Let the loop run until `check()` holds; fail after `timeout` seconds."""
    async with asyncio.timeout(timeout):
        # The conditions span tasks the test does not own: one loop iteration at a time
        # is the finest wait there is, and nothing here waits on a clock.
        while not check():  # noqa: ASYNC110
            await asyncio.sleep(0)
    assert check(), what
