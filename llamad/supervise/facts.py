"""What the gateway may know about an instance, read without waiting on its task."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass

from llamad.backends.spec import InstanceSpec
from llamad.lifecycle.states import Start, State, Stop
from llamad.supervise.inbox import InstanceClosed
from llamad.supervise.instance import Instance
from llamad.supervise.liveness import serves


@dataclass(frozen=True)
class Facts:
    """A snapshot of one instance: its spec, state, process and why it last failed."""

    spec: InstanceSpec
    state: State
    pid: int | None
    error: str | None
    # The last lines its last process wrote: its `ExitInfo`'s, shared, never copied.
    stderr_tail: Sequence[str]
    closing: bool  # being removed from the config
    retiring: bool = False  # removed by a reload, and still draining: new requests 404
    device: str | None = None  # where the gateway placed its latest start (`--device`)

    @property
    def name(self) -> str:
        """The instance's name."""
        return self.spec.name

    def reason(self) -> str:
        """Why the instance is not running, with the server's last words when there are any."""
        lines = [ln.strip() for ln in self.stderr_tail if ln.strip()][-5:]
        head = self.error or f"instance is {self.state.value}"
        return head + ("; last output: " + " | ".join(lines) if lines else "")


def facts_of(inst: Instance, retiring: bool = False) -> Facts:
    """The snapshot of `inst` now; `retiring` when the config no longer wants it."""
    tail = inst.last_exit.stderr_tail if inst.last_exit else ()
    pid = inst.child.pid if inst.child is not None else None
    record = inst.record
    return Facts(
        inst.spec, record.state, pid, record.error, tail, inst.closing, retiring, record.device
    )


class ByName:
    """What the gateway uses of the supervisor: facts, commands and waits by name."""

    instances: dict[str, Instance]
    wanted: dict[str, InstanceSpec]  # the latest reload's wish: a name not in it retires

    def names(self) -> list[str]:
        """Every instance, in config order."""
        return list(self.instances)

    def facts(self, name: str) -> Facts | None:
        """A snapshot of instance `name`, or None when there is no such instance."""
        inst = self.instances.get(name)
        return facts_of(inst, name not in self.wanted) if inst is not None else None

    async def command(self, name: str, event: Start | Stop) -> None:
        """Send `event` to instance `name` and wait until it is taken in; an instance
        that is gone, or going, takes nothing (as one that never was)."""
        inst = self.instances.get(name)
        if inst is not None and not inst.closing:
            with contextlib.suppress(InstanceClosed):  # it ended while the event waited
                await inst.send(event)

    async def wait_for(self, name: str, *states: State, timeout: float) -> bool:
        """Wait until `name` is in one of `states`; False on timeout or when it is gone."""
        inst = self.instances.get(name)
        return inst is not None and await inst.wait_until(*states, timeout=timeout)

    async def still_serves(self, name: str, pid: int) -> bool:
        """True when process `pid` of `name` lives and takes connections on its port now,
        though its exit may have happened before this loop got to see it."""
        inst = self.instances.get(name)
        if inst is None or inst.child is None or inst.child.pid != pid:
            return False
        return await serves(pid, inst.spec.probe_host, inst.spec.port)
