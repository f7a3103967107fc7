"""Binding a listener's address patiently: an address not up yet is waited for.

At login launchd starts llamad before Tailscale (or Wi-Fi, or a VPN) has brought up the
address a listener is configured on, and a restart can find its port still held for a
moment. Both pass on their own, so such a bind is tried again with backoff, the wait
shown in the status document and the log, and the listener serves as soon as the bind
succeeds. Any other failure (a port below 1024 without the right, say) will not pass by
waiting: it is reported once and the listener stays down.
"""

from __future__ import annotations

import asyncio
import errno
import socket
import time
from collections.abc import Callable
from typing import Any

import structlog

from llamad.common.retrying import rest

log = structlog.get_logger("llamad.listener")

WAIT_INITIAL_S, WAIT_MAX_S = 1.0, 30.0

# What passes by waiting, in words the status line can show.
TRANSIENT = {
    errno.EADDRNOTAVAIL: "address not available",
    errno.EADDRINUSE: "address in use",
}

Bind = Callable[[], socket.socket]


class Binding:
    """One listener's address and how binding it goes; the listener serving it is the
    only writer, the status document the reader."""

    def __init__(self, name: str, listen: str, clock: Callable[[], float] = time.monotonic):
        self.name, self.listen, self.clock = name, listen, clock
        self.state = "binding"  # then waiting, listening or failed
        self.error: str | None = None
        self.tries = 0
        self.next_try_at: float | None = None

    def trying(self) -> None:
        self.tries += 1

    def waiting(self, why: str, delay: float) -> None:
        self.state, self.error, self.next_try_at = "waiting", why, self.clock() + delay

    def failed(self, error: str) -> None:
        self.state, self.error, self.next_try_at = "failed", error, None

    def bound(self) -> None:
        self.state, self.error, self.next_try_at = "listening", None, None

    def to_dict(self) -> dict[str, Any]:
        left = None if self.next_try_at is None else max(0.0, self.next_try_at - self.clock())
        return {
            "listen": self.listen,
            "state": self.state,
            "error": self.error,
            "tries": self.tries,
            "next_try_s": None if left is None else round(left, 1),
        }


class Bindings:
    """Every TCP listener's `Binding`, by name (`gateway`, `remote`): the status
    document's `daemon.listeners`."""

    def __init__(self) -> None:
        self._by_name: dict[str, Binding] = {}

    def add(self, name: str, listen: str) -> Binding:
        self._by_name[name] = binding = Binding(name, listen)
        return binding

    def to_dict(self) -> dict[str, Any]:
        return {name: b.to_dict() for name, b in self._by_name.items()}


def reason(exc: OSError) -> str | None:
    """Why a bind failed, in words, when waiting can mend it; None when it cannot."""
    if isinstance(exc, socket.gaierror):  # a name (a tailnet's) not resolvable yet
        return "name not resolved" if exc.errno in (socket.EAI_NONAME, socket.EAI_AGAIN) else None
    return TRANSIENT.get(exc.errno or 0)


async def bind_patiently(
    bind: Bind,
    binding: Binding,
    shutdown: asyncio.Event,
    *,
    initial: float = WAIT_INITIAL_S,
    maximum: float = WAIT_MAX_S,
) -> socket.socket | None:
    """`bind()` once it succeeds, tried again after a doubling delay while it fails for
    a reason waiting mends; None when `shutdown` is set first. Any other OSError is
    raised, and `binding` says `failed`."""
    delay = initial
    while True:
        binding.trying()
        try:
            sock = bind()
        except OSError as exc:
            why = reason(exc)
            if why is None:
                binding.failed(str(exc))
                log.error("listener.bind_failed", listener=binding.name, listen=binding.listen,
                          error=str(exc))  # fmt: skip
                raise
            binding.waiting(why, delay)
            log.warning("listener.waiting", listener=binding.name, listen=binding.listen,
                        error=why, retry_in_s=delay)  # fmt: skip
            if await rest(delay, shutdown):
                return None
            delay = min(delay * 2, maximum)
            continue
        binding.bound()
        return sock
