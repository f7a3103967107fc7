"""One step of an instance's machine, as the instance task takes it: the prompt cache's
hooks around the pure `lifecycle.machine.step` (a save before a planned stop, a restore
before the next process is routed to), and the state change logged once.
"""

from __future__ import annotations

import asyncio
import random

import structlog

from llamad.backends.spec import InstanceSpec
from llamad.lifecycle.actions import Action
from llamad.lifecycle.machine import step
from llamad.lifecycle.states import Event, Record
from llamad.supervise.slot_cache import SlotCache

log = structlog.get_logger("llamad.instance")


async def advance(
    spec: InstanceSpec, cache: SlotCache | None, before: Record, event: Event
) -> tuple[Record, list[Action]]:
    """The record after `event`, and the actions to carry out."""
    if cache is not None:
        await cache.before(spec, before, event)
    now = asyncio.get_running_loop().time()
    after, actions = step(before, event, now, spec.knobs, random.uniform(-1.0, 1.0))
    if cache is not None:
        await cache.after(spec, before, after)
    if after.state is not before.state:
        log.info(
            "instance.state_changed",
            instance=spec.name,
            **{"from": before.state.value},
            to=after.state.value,
            pid=after.pid or before.pid,
            error=after.error,
        )
    return after, actions
