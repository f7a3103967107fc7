"""The commands a reload sends one instance: start, stop, and knobs applied in place.

A shutdown can close an instance while a reload works on it: its task ends, and an
instance that is gone needs neither a start nor a stop.
"""

from __future__ import annotations

import contextlib

from llamad.config.load import InstanceSpec
from llamad.lifecycle.states import Start, State, Stop
from llamad.supervise.inbox import InstanceClosed
from llamad.supervise.instance import Instance

DOWN = (State.STOPPED, State.IDLE)  # no process, and none wanted until someone asks


async def start(inst: Instance) -> None:
    """Start `inst`; returns once its task has taken the start in."""
    with contextlib.suppress(InstanceClosed):
        await inst.send(Start())


async def stop(inst: Instance) -> None:
    """Stop `inst` and wait until it is stopped (at most its stop_timeout, and 5 s)."""
    with contextlib.suppress(InstanceClosed):
        await inst.send(Stop())
        await inst.wait_until(State.STOPPED, timeout=inst.spec.knobs.stop_timeout + 5)


def update_in_place(inst: Instance, spec: InstanceSpec) -> None:
    """Take a spec whose launch is unchanged: supervise knobs are read live by the
    probes and the machine, so no restart is needed."""
    if spec == inst.spec:
        return
    inst.respec(spec)
    if spec.autostart and inst.record.state in DOWN:
        inst.post(Start())
