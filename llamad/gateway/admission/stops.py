"""The gateway's stops: evictions, idle stops and unloads, claimed on a slot by whoever
decided them (`Slot.claim_stop`) and carried out here, to IDLE, with a group's other
members stopped as one.
"""

from __future__ import annotations

import structlog

from llamad.gateway.admission.background import Background
from llamad.gateway.admission.devices.ledger import Ledger
from llamad.gateway.admission.notes import Notes
from llamad.gateway.admission.rules import Slot, StopCause, StopWhy
from llamad.gateway.admission.slots import Slots
from llamad.gateway.admission.together import Together
from llamad.gateway.books.metrics import GatewayMetrics
from llamad.gateway.models.supervisor_view import SupervisorView
from llamad.lifecycle.states import State, Stop

log = structlog.get_logger("llamad.gateway")

DOWN = (State.IDLE, State.STOPPED, State.FAILED)


class Stops:
    """Carries out the stops claimed on slots, now or in the background."""

    def __init__(
        self,
        supervisor: SupervisorView,
        slots: Slots,
        metrics: GatewayMetrics,
        notes: Notes,
        together: Together,
        ledger: Ledger,
        background: Background,
    ) -> None:
        self.sup, self.slots, self.metrics, self.notes = supervisor, slots, metrics, notes
        self.together, self.ledger, self.background = together, ledger, background

    async def claimed(self, slot: Slot) -> bool:
        """Carry out the stop claimed on `slot` (to IDLE) and wait until the model is down;
        True when it got there. The claim ends either way."""
        name, why, cause = slot.name, slot.stop, slot.cause
        facts = self.sup.facts(name)
        try:
            if facts is None or facts.state in DOWN:
                return True
            size = self.ledger.size(name)
            if why is StopWhy.EVICT:
                told = (cause or StopCause("memory")).fields()
                log.info("gateway.evicted", instance=name, model=name, size_bytes=size, **told)
                self.metrics.evictions.labels(name).inc()
                self.notes.stopped(name, "evict", size, told)
            else:  # its idle timer, or a client's unload (Ollama's keep_alive 0)
                reason = "unload" if why is StopWhy.UNLOAD else "idle_timeout"
                told = (cause or StopCause(reason)).fields()
                log.info(
                    "instance.idle_stopped", instance=name, model=name, size_bytes=size,
                    reason=reason, **told,
                )  # fmt: skip
                self.metrics.idle_stops.labels(name).inc()
                self.notes.stopped(name, reason, size, told)
            await self.sup.command(name, Stop(idle=True))
            timeout = facts.spec.knobs.stop_timeout + 5
            return await self.sup.wait_for(name, *DOWN, timeout=timeout)
        finally:
            slot.end_stop()
            self.slots.poke()
            for other in self.together.to_stop(name, why, cause) if why else []:  # a group
                self.soon(other)

    def soon(self, slot: Slot) -> None:
        """Run the stop claimed on `slot` in the background."""
        self.background.spawn(self.claimed(slot), f"stop-{slot.name}")
