"""While a listener drains (a shutdown's delay, readiness already failing) it serves
everything, and each answer closes its connection so that the client reconnects to
whatever a load balancer routes to now; requests already sent behind it are served."""

from __future__ import annotations

import pytest
from helpers import until
from listener_helpers import post, said, served

pytestmark = pytest.mark.timeout(30)


async def test_while_draining_an_answer_closes_its_connection() -> None:
    draining = [False]
    async with served(draining=lambda: draining[0]) as s:
        client = await s.connect()
        await client.send(post("/a", b"one"))
        one = await client.reply()
        said(one, "/a", b"one")
        assert b"connection" not in one.headers  # kept alive
        # A request begun before the drain and answered during it closes too.
        release = s.stage.hold("/b")
        await client.send(post("/b", b"two"))
        await until(lambda: "began /b" in s.stage.log, 10, "/b begun")
        draining[0] = True
        release.set_result(None)
        two = await client.reply()
        said(two, "/b", b"two")
        assert two.headers[b"connection"] == b"close"
        assert await client.at_eof()
        # New connections are still served meanwhile.
        again = await s.connect()
        await again.send(post("/c", b"three"))
        said(await again.reply(), "/c", b"three")
        assert await again.at_eof()


async def test_requests_pipelined_behind_are_served_before_the_close() -> None:
    async with served(draining=lambda: True) as s:
        client = await s.connect()
        release = s.stage.hold("/a")
        await client.send(post("/a", b"one") + post("/b", b"two"))
        await until(lambda: s.stage.log == ["began /a"], 10, "the first begun")
        release.set_result(None)
        one, two = await client.reply(), await client.reply()
        said(one, "/a", b"one")
        said(two, "/b", b"two")
        assert b"connection" not in one.headers
        assert two.headers[b"connection"] == b"close"
        assert await client.at_eof()
