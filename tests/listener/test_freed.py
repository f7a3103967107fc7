"""A closed connection's objects are freed when it closes, by reference counting alone:
left in cycles, a neighbour churning thousands of connections a second left tens of MB
to the next full collection."""

from __future__ import annotations

import gc
import weakref

import pytest
from helpers import until
from listener_helpers import post, served

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("how", ["head still coming", "answered", "closed for room"])
async def test_a_closed_connection_needs_no_cyclic_collection(how: str) -> None:
    gc.collect()
    gc.disable()
    try:
        async with served() as s:
            client = await s.connect()
            if how == "answered":
                await client.send(post("/x", b"hi"))
                assert (await client.reply()).status == 200
            else:
                await client.send(b"GET /x HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            await until(lambda: len(s.listener.table.open) == 1, what="the connection held")
            (conn,) = s.listener.table.open.conns
            gone = weakref.ref(conn)
            del conn
            if how == "closed for room":
                s.listener.table.remove(gone())  # type: ignore[arg-type]
                gone().evict()  # type: ignore[union-attr]
            else:
                client.close()
            await until(lambda: not s.listener.table.open.conns, what="the connection forgotten")
            await until(lambda: gone() is None, what="the connection's objects freed")
    finally:
        gc.enable()
