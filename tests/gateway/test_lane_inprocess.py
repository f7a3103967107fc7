"""The gateway's lane (`gateway/lane.py`) under forced interleavings, in process.

Over the supervisor double, with a relay stand-in whose answer waits on a future the test
resolves, this proves: `take` counts the request in flight in the very step that decides
to serve it (an idle tick or a drain begun in that step cannot come between); it gives
back, admitting nothing, whatever the app must answer (a load, an unknown or shared
name, a bad body, a drain, a missing, wrong or too narrow key); `offer` turns down every
head the middleware or the balancer must see; a task cancelled before its first step
still releases its slot and books one 499; and a relay that got no answer from a
restarting process is sent to its successor, or, when the process did not restart,
ends as a 502 in the path's family's shape. A relay's error answer is written after
its slot is released, and the activity record is timed from the request's `began`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import time
from collections.abc import Callable, Coroutine
from typing import Any

import pytest
from pool_helpers import OK, body_of, read_request, upstream
from supervisor_double import Double, gateway, spec, until

from llamad.common.lanes import LaneRequest
from llamad.config.gateway_keys import NamedKey
from llamad.gateway.activity import Tally
from llamad.gateway.connection import NotAnswered
from llamad.gateway.core import Gateway
from llamad.gateway.keyguard import KeyGuard
from llamad.gateway.lane import GatewayLane
from llamad.gateway.limits import GatewayLimits
from llamad.gateway.naming import Rewrite
from llamad.gateway.pool import Pool
from llamad.gateway.pooled import Sending
from llamad.gateway.port import Upstream, UpstreamError
from llamad.gateway.proxy import Relay
from llamad.lifecycle.states import State

pytestmark = pytest.mark.timeout(20)

MAX_BODY = 256  # [gateway] max_body, small enough to pass with a padded prompt
SERVER = ("127.0.0.1", 8080)
CLIENT = "127.0.0.1"


class StubRelay(Relay):
    """Each relay waits on its own future: None answers 200, an exception is raised."""

    def __init__(self) -> None:  # no pool: nothing goes upstream
        self.calls: list[Upstream] = []
        self.started: list[Upstream] = []
        self.gates: list[asyncio.Future[Exception | None]] = []

    def start(self, scope: Any, upstream: Upstream, path: str, body: bytes) -> Sending:
        self.started.append(upstream)
        return Sending(("127.0.0.1", 9), body, None, "POST")

    async def relay(
        self,
        scope: Any,
        send: Any,
        upstream: Upstream,
        path: str,
        body: bytes,
        first_byte: Callable[[int], None],
        rename: Rewrite | None = None,
        tally: Tally | None = None,
        sending: Sending | None = None,
    ) -> None:
        self.calls.append(upstream)
        gate: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()
        self.gates.append(gate)
        failure = await gate
        if failure is not None:
            raise failure
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        first_byte(200)
        await send({"type": "http.response.body", "body": b'{"ok": true}'})


class FakeAnswer:
    """`LaneAnswer`: keeps what is sent; `finish` runs `ended` as `LaneCycle.finish` does."""

    def __init__(self) -> None:
        self.ended: list[Callable[[], None]] = []
        self.messages: list[dict[str, Any]] = []

    async def send(self, message: Any) -> None:
        self.messages.append(message)

    def finish(self) -> None:
        for callback in list(self.ended):  # not cleared: a second run must change nothing
            callback()

    def status(self) -> int | None:
        return next((m["status"] for m in self.messages if "status" in m), None)

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.messages if "status" not in m)


def request(
    model: object = "a", path: str = "/v1/completions", key: str | None = None, **extra: Any
) -> LaneRequest:
    body = json.dumps({"model": model, "prompt": "hi", **extra}).encode()
    return raw(body, path, key)


def raw(body: bytes, path: str = "/v1/completions", key: str | None = None) -> LaneRequest:
    headers = [(b"host", b"127.0.0.1:8080"), (b"content-type", b"application/json")]
    if key is not None:
        headers.append((b"authorization", b"Bearer " + key.encode()))
    return LaneRequest(path, b"", headers, "127.0.0.1", body, time.perf_counter())


def lane_over(
    gw: Gateway, relay: Relay | None = None, guard: KeyGuard | None = None
) -> GatewayLane:
    limits = GatewayLimits(gw.settings, lambda: {})
    host_ok: Callable[[bytes, Any], bool] = lambda host, _: host != b"evil.example"  # noqa: E731
    return GatewayLane(gw, relay or StubRelay(), limits, host_ok, guard or KeyGuard())


def running_a(**keys: Any) -> tuple[Double, Gateway]:
    double = Double(auto=False)
    double.add(spec("a", idle_timeout=1.0), State.RUNNING)
    return double, gateway(double, max_body=MAX_BODY, **keys)


def served(lane: GatewayLane, req: LaneRequest, answer: FakeAnswer) -> Coroutine[Any, Any, None]:
    work = lane.take(req, answer)
    assert work is not None, "the lane gave back a request it should serve"
    return work


def in_flight(gw: Gateway) -> dict[str, int]:
    return {name: flying for name, (flying, _) in gw.sched.counts().items() if flying}


def requests_counted(gw: Gateway, label: str, status: str) -> float:
    labels = {"model": label, "status": status}
    return gw.metrics.registry.get_sample_value("llamad_gateway_requests_total", labels) or 0.0


# 1. The decision and the slot are one step -----------------------------------------------


async def test_take_counts_the_request_in_flight_before_its_task_runs() -> None:
    double, gw = running_a()
    relay = StubRelay()
    lane, answer = lane_over(gw, relay), FakeAnswer()
    gw.idle.tick(time.monotonic())  # arms a's idle timer
    work = served(lane, request(), answer)
    assert gw.sched.slot("a").in_flight == 1
    gw.idle.tick(time.monotonic() + 60)  # expired, in the same step as the take
    assert double.stops() == [], "an idle stop landed on a request the lane took"
    task = asyncio.ensure_future(work)
    await until(lambda: len(relay.gates) == 1, "relayed")
    relay.gates[0].set_result(None)
    await task
    answer.finish()
    assert answer.status() == 200
    assert answer.body() == b'{"ok": true}'
    assert in_flight(gw) == {}
    (record,) = gw.activity.recent()
    assert (record.status, record.model, record.instance, record.route) == (
        200, "a", "a", "/v1/completions",
    )  # fmt: skip
    assert requests_counted(gw, "a", "200") == 1
    await gw.close()


async def test_a_drain_begun_in_the_take_step_waits_for_the_request() -> None:
    double, gw = running_a()
    relay = StubRelay()
    lane, answer = lane_over(gw, relay), FakeAnswer()
    entered = asyncio.Event()
    leave: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    async def handover() -> None:
        async with gw.draining([], ["a"]):
            entered.set()
            await leave

    work = served(lane, request(), answer)
    drain = asyncio.ensure_future(handover())  # scheduled first: it begins before the relay
    task = asyncio.ensure_future(work)
    await until(lambda: len(relay.gates) == 1, "the taken request is relayed all the same")
    assert gw.sched.slot("a").drains == 1
    assert not entered.is_set()
    assert lane.take(request(), FakeAnswer()) is None, "admitted while a drain holds it"
    relay.gates[0].set_result(None)
    await task
    await until(entered.is_set, "the drain entered once the request ended")
    assert in_flight(gw) == {}
    leave.set_result(None)
    await drain
    assert answer.status() == 200
    assert double.stops() == []
    await gw.close()


# 2. What the lane gives back to the app ---------------------------------------------------


def _given_back_cases() -> list[Any]:
    padded = request(padding="x" * MAX_BODY)
    return [
        pytest.param(request("lazy"), id="on-demand-idle"),
        pytest.param(request("nope"), id="unknown"),
        pytest.param(request("shared"), id="alias-two-share"),
        pytest.param(raw(b"not json"), id="not-json"),
        pytest.param(raw(b'["a"]'), id="not-an-object"),
        pytest.param(raw(b'{"prompt": "hi"}'), id="no-model"),
        pytest.param(request(""), id="empty-model"),
        pytest.param(request(7), id="model-not-a-string"),
        pytest.param(raw(b'{"model": "\\ud800"}'), id="lone-surrogate"),
        pytest.param(padded, id="over-max-body"),
    ]


@pytest.mark.parametrize("req", _given_back_cases())
async def test_take_gives_back_and_admits_nothing(req: LaneRequest) -> None:
    double = Double(auto=False)
    double.add(spec("a"), State.RUNNING)
    double.add(spec("lazy"), State.IDLE)
    for name in ("r1", "r2"):
        double.add(dataclasses.replace(spec(name), aliases=("shared",)), State.RUNNING)
    gw = gateway(double, max_body=MAX_BODY)
    answer = FakeAnswer()
    assert lane_over(gw).take(req, answer) is None
    assert in_flight(gw) == {}
    assert answer.ended == []
    assert answer.messages == []
    assert double.commands == [], "the lane started a load"
    assert len(gw.activity) == 0
    await gw.close()


async def test_take_serves_an_alias_only_one_instance_has() -> None:
    double = Double(auto=False)
    double.add(dataclasses.replace(spec("a"), aliases=("solo",)), State.RUNNING)
    gw = gateway(double)
    work = lane_over(gw).take(request("solo"), FakeAnswer())
    assert work is not None
    assert in_flight(gw) == {"a": 1}
    work.close()  # never run: the slot is let go by `ended`, tested below
    await gw.close()


async def test_take_gives_back_while_a_drain_holds_the_slot() -> None:
    _, gw = running_a()
    gw.sched.slot("a").begin_drain()
    assert lane_over(gw).take(request(), FakeAnswer()) is None
    assert in_flight(gw) == {}
    gw.sched.slot("a").end_drain()
    work = lane_over(gw).take(request(), FakeAnswer())
    assert work is not None, "still refused once the drain ended"
    work.close()
    await gw.close()


# 3. What offer turns down from the head alone ---------------------------------------------

OK_HEAD = [(b"host", b"127.0.0.1:8080"), (b"content-length", b"20")]


@pytest.mark.parametrize(
    ("path", "headers"),
    [
        pytest.param("/v1/models", OK_HEAD, id="not-body-routed"),
        pytest.param("/api/chat", OK_HEAD, id="ollama"),
        pytest.param("/v1/completions", [*OK_HEAD, (b"origin", b"http://x")], id="origin"),
        pytest.param("/v1/completions", [*OK_HEAD, (b"x-llamad-hop", b"peer")], id="hop"),
        pytest.param(
            "/v1/completions",
            [(b"host", b"127.0.0.1:8080"), (b"content-length", str(MAX_BODY + 1).encode())],
            id="content-length-over-max-body",
        ),
        pytest.param(
            "/v1/completions",
            [(b"host", b"127.0.0.1:8080"), (b"content-length", b"-1")],
            id="content-length-not-a-number",
        ),
        pytest.param(
            "/v1/completions",
            [(b"host", b"evil.example"), (b"content-length", b"20")],
            id="host-refused",
        ),
    ],
)
async def test_offer_turns_down(path: str, headers: list[tuple[bytes, bytes]]) -> None:
    _, gw = running_a()
    lane = lane_over(gw)
    assert lane.offer("/v1/completions", OK_HEAD, SERVER, CLIENT), (
        "the baseline head is not offered"
    )
    assert not lane.offer(path, headers, SERVER, CLIENT)
    await gw.close()


KEYS = (NamedKey("all", "secret-all"), NamedKey("only-b", "secret-b", frozenset({"b"})))


@pytest.mark.parametrize(
    "key", [None, "wrong", "secret-b"], ids=["no-key", "wrong-key", "key-not-for-the-model"]
)
async def test_take_gives_back_what_the_key_check_must_answer(key: str | None) -> None:
    _, gw = running_a(keys=KEYS)
    guard = KeyGuard()
    lane = lane_over(gw, guard=guard)
    asked = request(key=key)
    # A key the app refuses from the head alone is never read by the lane: the client
    # hears 401 before it sends the body. One good for another model is take's to see.
    assert lane.offer("/v1/completions", asked.headers, SERVER, CLIENT) == (key == "secret-b")
    assert lane.take(asked, FakeAnswer()) is None
    assert in_flight(gw) == {}
    assert len(guard.limiter) == 0, "the app counts a wrong key, once it is given back"
    await gw.close()


async def test_take_gives_back_everything_from_an_address_blocked_for_guessing() -> None:
    _, gw = running_a(keys=KEYS)
    guard = KeyGuard()
    for _ in range(guard.limiter.max_failures):
        guard.failed({"client": ("127.0.0.1", 0)}, True)
    assert lane_over(gw, guard=guard).take(request(key="secret-all"), FakeAnswer()) is None
    assert in_flight(gw) == {}
    await gw.close()


async def test_a_valid_key_is_served_and_booked_under_its_name() -> None:
    _, gw = running_a(keys=KEYS)
    relay = StubRelay()
    answer = FakeAnswer()
    task = asyncio.ensure_future(served(lane_over(gw, relay), request(key="secret-all"), answer))
    await until(lambda: len(relay.gates) == 1, "relayed")
    relay.gates[0].set_result(None)
    await task
    assert [(r.status, r.key) for r in gw.activity.recent()] == [(200, "all")]
    await gw.close()


# 4. Cancelled before its first step -------------------------------------------------------


async def test_a_task_cancelled_before_it_starts_releases_and_books_one_499() -> None:
    _, gw = running_a()
    relay = StubRelay()
    answer = FakeAnswer()
    task = asyncio.get_running_loop().create_task(served(lane_over(gw, relay), request(), answer))
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    assert relay.calls == []
    assert in_flight(gw) == {"a": 1}, "only `ended` can let go of it now"
    answer.finish()
    answer.finish()  # the protocol's callbacks may be told twice: counted once
    assert in_flight(gw) == {}
    assert [r.status for r in gw.activity.recent()] == [499]
    assert requests_counted(gw, "a", "499") == 1
    await gw.close()


# 5. No answer from a restarting process ---------------------------------------------------


async def test_a_relay_that_got_no_answer_goes_to_the_successor() -> None:
    double = Double(auto=False)
    double.add(spec("a", on_demand=False), State.RUNNING)
    gw = gateway(double)
    relay = StubRelay()
    answer = FakeAnswer()
    task = asyncio.ensure_future(served(lane_over(gw, relay), request(), answer))
    await until(lambda: len(relay.gates) == 1, "relayed")
    double.crash("a")  # died before answering; the supervisor restarts it
    relay.gates[0].set_result(NotAnswered("connection reset", sent=True))
    await until(lambda: len(relay.calls) == 1 and not task.done(), "waiting for the successor")
    double.move("a", State.RUNNING)
    await until(lambda: len(relay.gates) == 2, "sent again")
    first, second = relay.calls
    assert second.pid not in (None, first.pid)
    assert in_flight(gw) == {"a": 1}, "the resend holds the one slot it was admitted to"
    relay.gates[1].set_result(None)
    await task
    answer.finish()
    assert answer.status() == 200
    assert in_flight(gw) == {}
    assert [(r.status, r.instance) for r in gw.activity.recent()] == [(200, "a")]
    await gw.close()


@pytest.mark.parametrize(
    ("path", "shape"),
    [("/v1/chat/completions", "openai"), ("/v1/messages", "anthropic")],
)
async def test_no_answer_from_a_process_that_still_runs_is_a_502_in_the_family_shape(
    path: str, shape: str
) -> None:
    _, gw = running_a()
    relay = StubRelay()
    answer = FakeAnswer()
    task = asyncio.ensure_future(served(lane_over(gw, relay), request(path=path), answer))
    await until(lambda: len(relay.gates) == 1, "relayed")
    relay.gates[0].set_result(NotAnswered("connection refused", sent=False))
    await task
    answer.finish()
    assert len(relay.calls) == 1, "sent again to a process that never left"
    assert answer.status() == 502
    doc = json.loads(answer.body())
    if shape == "openai":
        assert doc["error"]["code"] == "upstream_error"
    else:
        assert doc["type"] == "error"
        assert doc["error"]["type"] == "api_error"
    assert in_flight(gw) == {}
    assert [r.status for r in gw.activity.recent()] == [502]
    assert requests_counted(gw, "a", "502") == 1
    await gw.close()


# 6. Regressions from a review of the lane -------------------------------------------------


class SlotWatchingAnswer(FakeAnswer):
    """Notes the requests in flight when the answer's head is written."""

    def __init__(self, gw: Gateway) -> None:
        super().__init__()
        self.gw = gw
        self.in_flight_at_start: dict[str, int] | None = None

    async def send(self, message: Any) -> None:
        if message["type"] == "http.response.start":
            self.in_flight_at_start = in_flight(self.gw)
        await super().send(message)


@pytest.mark.parametrize(
    "failure",
    [UpstreamError("connection refused"), NotAnswered("connection refused", sent=False)],
    ids=["upstream-error", "not-answered"],
)
async def test_a_failed_relay_releases_its_slot_before_the_error_answer(
    failure: Exception,
) -> None:
    _, gw = running_a()
    relay = StubRelay()
    answer = SlotWatchingAnswer(gw)
    task = asyncio.ensure_future(served(lane_over(gw, relay), request(), answer))
    await until(lambda: len(relay.gates) == 1, "relayed")
    relay.gates[0].set_result(failure)
    await task
    # As the app's lease ends before its error answer: a client that reads the 502 and
    # asks again finds the slot free, not counted against it by a request already over.
    assert answer.status() == 502
    assert answer.in_flight_at_start == {}
    answer.finish()
    assert in_flight(gw) == {}
    assert [r.status for r in gw.activity.recent()] == [502]
    assert requests_counted(gw, "a", "502") == 1
    await gw.close()


async def test_the_record_times_the_request_from_its_head() -> None:
    _, gw = running_a()
    relay = StubRelay()
    answer = FakeAnswer()
    # The listener read its head 5 s ago (a slow upload, say).
    asked = dataclasses.replace(request(), began=time.perf_counter() - 5)
    task = asyncio.ensure_future(served(lane_over(gw, relay), asked, answer))
    await until(lambda: len(relay.gates) == 1, "relayed")
    relay.gates[0].set_result(None)
    await task
    answer.finish()
    (record,) = gw.activity.recent()
    assert record.status == 200
    assert record.duration_s >= 5
    assert record.ttfb_s is not None
    assert record.ttfb_s >= 5
    await gw.close()


# 6. The request goes upstream before the rest is made ----------------------------------


async def test_a_lane_request_is_sent_in_the_step_it_is_taken_and_closed_if_never_served() -> None:
    """Through a real relay and pool: the request reaches the upstream before the lane's
    task has run at all; that task cancelled before its first step (its client gone)
    closes the connection the request went on, so the model stops working on it."""
    arrived, closed = asyncio.Event(), asyncio.Event()

    async def held(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(OK)  # the warm-up's answer: the connection is kept
        await read_request(reader)
        arrived.set()
        await reader.read()  # never answered; ends from the gateway's side
        closed.set()

    pool = Pool()
    async with upstream(held) as (url, _):
        double = Double(auto=False)
        port = int(url.rsplit(":", 1)[1])
        double.add(dataclasses.replace(spec("a"), port=port), State.RUNNING)
        gw = gateway(double, max_body=MAX_BODY)
        assert await body_of(pool, url) == (200, b"ok")
        answer = FakeAnswer()
        task = asyncio.ensure_future(served(lane_over(gw, Relay(pool)), request(), answer))
        task.cancel()  # before its first step
        async with asyncio.timeout(10):
            await arrived.wait()  # sent all the same: in take's step
        await asyncio.wait({task})
        answer.finish()  # as the listener does once the task is over
        async with asyncio.timeout(10):
            await closed.wait()
        assert in_flight(gw) == {}
        await gw.close()
    await pool.close()
