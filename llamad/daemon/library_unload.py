"""Unloading a library model before `llamactl rm` deletes its files: through the gateway's
unload, which stops the process once its requests in flight have ended, then waiting
(bounded) until no process runs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from llamad.library.remove import Busy
from llamad.lifecycle.states import State
from llamad.supervise.daemon_state import DaemonState
from llamad.supervise.gateway_link import GatewayLink

if TYPE_CHECKING:  # the gateway's modules load only when one is configured
    from llamad.gateway.core import Gateway

# No process runs in these: the files can go.
DOWN = (State.IDLE, State.STOPPED, State.FAILED)
# How long a removal waits for the model's requests in flight to end.
WAIT_S = 60.0


async def unload_for_removal(
    link: GatewayLink[Gateway], state: DaemonState, name: str, wait: float = WAIT_S
) -> None:
    """Unload instance `name` and wait until it has no process; Busy after `wait`.
    Without a gateway serving, nothing routes to it: its files can go as they are."""
    gateway = link.current
    inst = state.supervisor.instances.get(name)
    if gateway is None or inst is None or inst.record.state in DOWN:
        return
    from llamad.gateway.contract.port import GatewayError

    try:
        await gateway.unload(name)
    except GatewayError:
        return  # not routable any more (being removed by a reload): nothing to wait for
    if not await inst.wait_until(*DOWN, timeout=wait):
        raise Busy(
            f"{name} is still answering requests after {wait:g} s; it unloads once they "
            "end: remove it again then"
        )
