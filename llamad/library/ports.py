"""Ports for library models: from a range outside the systems' ephemeral ports, stable
for a name, never one a configured instance uses or someone else holds.

Inside an ephemeral range (Linux 32768-60999, macOS 49152-65535), a connection to a port
nobody listens on can be given that very port as its own source and connect to itself,
holding the port: a model would then fail to bind.
"""

from __future__ import annotations

import errno
import hashlib
import socket
from collections.abc import Callable, Iterable, Mapping

DEFAULT_RANGE = (20000, 20999)


def parse_range(text: str) -> tuple[int, int]:
    """`"20000-20999"` -> (20000, 20999); ValueError naming what is wrong."""
    lo, sep, hi = text.partition("-")
    if not sep or not lo.strip().isdigit() or not hi.strip().isdigit():
        raise ValueError(f'must be a range like "20000-20999" (got {text!r})')
    first, last = int(lo), int(hi)
    if not 1024 <= first <= last <= 65535:
        raise ValueError(f"must lie within 1024-65535, low to high (got {text!r})")
    return first, last


def held(port: int, host: str = "127.0.0.1") -> bool:
    """Whether someone else listens on `port` (a test bind, with SO_REUSEADDR as
    llama-server binds, so our own probes' TIME_WAIT sockets do not count)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError as exc:
            return exc.errno in (errno.EADDRINUSE, errno.EACCES)
    return False


def assign(
    names: Iterable[str],
    taken: set[int],
    previous: Mapping[str, int],
    span: tuple[int, int] = DEFAULT_RANGE,
    is_held: Callable[[int], bool] = held,
) -> tuple[dict[str, int], list[str]]:
    """A port for each name, and the names left without one (the range is full).

    A name keeps the port it had (its process may be running on it: a test bind would
    find it held by ourselves); a new name starts at a place in the range that its name
    decides, so it gets the same port from one daemon run to the next.
    """
    first, last = span
    size = last - first + 1
    used = set(taken)
    ports: dict[str, int] = {}
    todo = []
    for name in names:
        port = previous.get(name)
        if port is not None and first <= port <= last and port not in used:
            ports[name] = port
            used.add(port)
        else:
            todo.append(name)
    left = []
    for name in todo:
        start = int.from_bytes(hashlib.sha256(name.encode()).digest()[:4], "big") % size
        for i in range(size):
            port = first + (start + i) % size
            if port not in used and not is_held(port):
                ports[name] = port
                used.add(port)
                break
        else:
            left.append(name)
    return ports, left
