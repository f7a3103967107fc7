"""The MLX deep probe while the gateway has a request in flight: no completion is sent
to queue behind it, and one that timed out as a request came is not held against the
server; anything else still is."""

from __future__ import annotations

import dataclasses
from typing import Any

from llamad.backends.mlx.probe import DeepProbe
from llamad.backends.probes import Health
from llamad.backends.spec import InstanceSpec
from llamad.lifecycle.states import Knobs

SPEC = InstanceSpec("m", "127.0.0.1", 8080, None, (), (), (), kind="mlx")
OK = Health(True, 200, 1.0, "now")
TIMED_OUT = Health(False, None, 300.0, "now", "no answer within 0.3s", timed_out=True)
HTTP_500 = Health(False, 500, 1.0, "now", "HTTP 500")


class Prober:
    """`/health` answers 200; completions answer as the test says, and are counted."""

    def __init__(self, deep: list[Health], on_deep: Any = None) -> None:
        self.deep, self.sent, self.on_deep = deep, 0, on_deep

    async def probe(self, url: str, timeout: float) -> Health:
        return OK

    async def request(self, method: str, url: str, timeout: float, body: bytes) -> Health:
        self.sent += 1
        if self.on_deep is not None:
            self.on_deep()
        return self.deep.pop(0)


def deep_probe(prober: Prober, busy: list[bool]) -> DeepProbe:
    knobs = Knobs(deep_probe_interval=1e-9, deep_probe_timeout=0.3)
    return DeepProbe(SPEC, prober, lambda: knobs, lambda: busy[0])  # type: ignore[arg-type]


async def ready(probe: DeepProbe) -> None:
    assert (await probe(1.0)).ok  # readiness: the first completion answered


async def test_no_completion_queues_behind_a_request_in_flight() -> None:
    busy, prober = [False], Prober([OK])
    probe = deep_probe(prober, busy)
    await ready(probe)
    busy[0] = True
    for _ in range(3):
        assert (await probe(1.0)).ok
    assert prober.sent == 1


async def test_a_timeout_as_a_request_came_is_not_held_against_it() -> None:
    busy = [False]
    prober = Prober([OK, TIMED_OUT], on_deep=lambda: busy.__setitem__(0, prober.sent == 2))
    probe = deep_probe(prober, busy)
    await ready(probe)
    assert (await probe(1.0)).ok


async def test_an_idle_server_that_times_out_fails_the_probe() -> None:
    probe = deep_probe(Prober([OK, TIMED_OUT]), [False])
    await ready(probe)
    failed = await probe(1.0)
    assert not failed.ok
    assert failed.error == "one-token completion: no answer within 0.3s"


async def test_an_error_while_a_request_came_still_counts() -> None:
    busy = [False]
    prober = Prober([OK, HTTP_500], on_deep=lambda: busy.__setitem__(0, prober.sent == 2))
    probe = deep_probe(prober, busy)
    await ready(probe)
    assert not (await probe(1.0)).ok


async def test_before_ready_a_busy_flag_excuses_nothing() -> None:
    prober = Prober([TIMED_OUT])
    probe = deep_probe(prober, [True])
    assert not (await probe(1.0)).ok
    assert prober.sent == 1
    assert dataclasses.asdict(TIMED_OUT)["timed_out"] is True
