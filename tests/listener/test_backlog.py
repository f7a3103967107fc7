"""As many connections may wait to be accepted as the listener may hold: a neighbour
churning connections must not fill the listen queue, where a full queue drops the next
client's SYN and that client tries again only a second later."""

from __future__ import annotations

import resource
import socket
from pathlib import Path

import pytest
from listener_helpers import served

pytestmark = pytest.mark.timeout(60)

CAP = 2048
WAITING = 1500  # past the 1,024 the queue held before


def _room() -> str | None:
    """Why this machine cannot show it, or None."""
    somaxconn = Path("/proc/sys/net/core/somaxconn")
    if not somaxconn.exists():
        return "no /proc/sys/net/core/somaxconn (not Linux)"
    if int(somaxconn.read_text()) < WAITING:
        return f"net.core.somaxconn is under {WAITING}"
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < WAITING + 256:
        return f"the descriptor limit is under {WAITING + 256}"
    return None


@pytest.mark.skipif(_room() is not None, reason=str(_room()))
async def test_connections_past_a_thousand_wait_in_the_queue_while_the_loop_is_busy() -> None:
    socks: list[socket.socket] = []
    async with served(cap=CAP) as s:
        try:
            # Connected without yielding to the loop: none is accepted, every one waits
            # in the listen queue. One the queue has no room for is not answered (its
            # SYN is dropped), and its connect times out.
            for _ in range(WAITING):
                socks.append(socket.create_connection(("127.0.0.1", s.port), timeout=0.5))
        except TimeoutError:
            pytest.fail(f"connection {len(socks) + 1} found the listen queue full")
        finally:
            for sock in socks:
                sock.close()
