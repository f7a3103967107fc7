"""gateway.client_side.guard: the request's own task does the work, and a client that
leaves (told by its `Departure`, the one way) cancels it, and nothing else; and the door's
table for POSTs (no server)."""

from __future__ import annotations

import asyncio
import json

import pytest
from starlette.types import ASGIApp
from supervisor_double import Double, gateway

from llamad.gateway.access.client_side import guard
from llamad.gateway.app import build_app
from llamad.listener.departure import Departure
from llamad.upstream.pool import Pool

Message = dict[str, object]


async def _settle() -> None:
    """A few turns of the loop: whatever was scheduled has run."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_work_runs_in_the_request_task_and_leaves_no_cancel_behind() -> None:
    leaving, ran_in = Departure(lambda: None), []

    async def work() -> None:
        ran_in.append(asyncio.current_task())

    await guard(work(), leaving)
    leaving.leave()  # after the work: nothing of this request is left to cancel
    await _settle()
    me = asyncio.current_task()
    assert me is not None
    assert ran_in == [me]
    assert me.cancelling() == 0


async def test_a_cancel_from_outside_still_cancels_the_task() -> None:
    started = asyncio.Event()

    async def work() -> None:
        started.set()
        await asyncio.Event().wait()

    task = asyncio.ensure_future(guard(work(), Departure(lambda: None)))
    async with asyncio.timeout(10):
        await started.wait()
    task.cancel()  # a shutdown, say: not the client leaving
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_departure_cancels_the_work_and_resumes_reading() -> None:
    resumed: list[bool] = []
    leaving, started, cancelled = Departure(lambda: resumed.append(True)), asyncio.Event(), []

    async def work() -> None:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    async def leave_once_started() -> None:
        await started.wait()
        leaving.leave()

    async with asyncio.timeout(10), asyncio.TaskGroup() as group:
        group.create_task(leave_once_started())
        await guard(work(), leaving)
    assert cancelled == [True]
    assert resumed == [True]  # a paused reader is read again, as receive() would
    me = asyncio.current_task()
    assert me is not None
    assert me.cancelling() == 0


async def test_a_departure_after_the_work_cancels_nothing() -> None:
    leaving = Departure(lambda: None)

    async def work() -> None:
        pass

    await guard(work(), leaving)
    leaving.leave()
    await _settle()
    me = asyncio.current_task()
    assert me is not None
    assert me.cancelling() == 0


async def test_a_client_gone_before_the_work_starts_cancels_it_at_its_first_wait() -> None:
    leaving, reached = Departure(lambda: None), []
    leaving.leave()

    async def work() -> None:
        reached.append("start")
        await asyncio.Event().wait()
        reached.append("never")

    async with asyncio.timeout(10):
        await guard(work(), leaving)
    assert reached == ["start"]


async def _call(app: ASGIApp, method: str, path: str) -> tuple[int, dict[str, object]]:
    """One request to `app` with no body: its status and its JSON."""
    sent: list[Message] = []

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message: Message) -> None:
        sent.append(message)

    scope = {
        "type": "http", "method": method, "path": path, "raw_path": path.encode(),
        "root_path": "", "query_string": b"", "headers": [], "client": ("127.0.0.1", 1),
    }  # fmt: skip
    await app(scope, receive, send)
    body = b"".join(bytes(m.get("body", b"")) for m in sent[1:])  # type: ignore[arg-type]
    return int(str(sent[0]["status"])), json.loads(body)


async def test_a_body_routed_path_by_another_method_is_refused_by_the_door() -> None:
    """POSTs to the body-routed paths are one dict lookup; other methods are a 405."""
    app = build_app(gateway(Double()), pool=Pool())
    status, doc = await _call(app, "GET", "/v1/chat/completions")
    assert status == 405
    assert doc["error"]["code"] == "method_not_allowed"  # type: ignore[index]
    status, doc = await _call(app, "POST", "/v1/chat/completions")  # no body: no model
    assert status == 400
    assert "model" in doc["error"]["message"]  # type: ignore[index]
