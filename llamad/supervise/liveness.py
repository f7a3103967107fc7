"""Whether a process still serves: it lives (no zombie) and takes connections on its port.

A process that died has had its sockets closed by the kernel, its listening one too, before
its exit is reaped, so a fresh connection is refused at once: that, not a clock, tells a
crash from a server that closed a connection of its own accord.
"""

from __future__ import annotations

import asyncio
import contextlib

CONNECT_S = 1.0  # a live server on loopback takes a connection far sooner


async def serves(pid: int, host: str, port: int, timeout: float = CONNECT_S) -> bool:
    """True when process `pid` lives and a connection to `host`:`port` is taken now."""
    if not lives(pid):
        return False
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError):
        return False
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return lives(pid)  # what took the connection may have been its last act


def lives(pid: int) -> bool:
    """True when process `pid` exists and is not a zombie."""
    import psutil  # only for a request that failed: not on every daemon's start

    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.Error:
        return False
