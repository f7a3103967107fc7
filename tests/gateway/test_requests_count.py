"""`Gateway.requests`: what keeps the machine awake and excuses a busy server's slow
probe counts every request the gateway holds: local, on a peer, and waiting."""

from __future__ import annotations

import asyncio

import pytest
from supervisor_double import until
from test_replicas_inprocess import hold, setup

pytestmark = pytest.mark.timeout(20)


async def test_local_peer_and_waiting_requests_all_count() -> None:
    _double, gw, _ = setup()
    assert gw.requests() == 0
    loop = asyncio.get_running_loop()
    gates = [loop.create_future() for _ in range(3)]
    tasks = [asyncio.ensure_future(hold(gw, gate)) for gate in gates]
    await until(lambda: gw.balancer.waiting["m"] == 1, "the third waits at the gateway")
    assert gw.requests() == 3  # one on m0, one relayed to peer b, one waiting for a slot
    assert gw.requests("m0") == 1  # an instance's own: what its probe asks about
    assert gw.requests("b") == 0
    for gate in gates:
        gate.set_result(None)
    await asyncio.gather(*tasks)
    assert gw.requests() == 0
    await gw.close()
