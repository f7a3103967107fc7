"""systemd's sd_notify protocol, stdlib only.

Under `Type=notify` systemd waits for READY=1 before it calls the unit started, and with
`WatchdogSec=` it kills a unit that stops sending WATCHDOG=1. The protocol is one AF_UNIX
datagram per message to the socket named in `NOTIFY_SOCKET`. Outside systemd (a shell, launchd,
tests) the variable is unset and every call is a no-op, so the daemon can call these
unconditionally.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import socket
from collections.abc import Mapping


class Notifier:
    """Sends sd_notify messages to one socket; a no-op when there is no socket."""

    def __init__(self, address: str | None = None, *, watchdog_usec: int | None = None) -> None:
        """Use `address` as given in NOTIFY_SOCKET ('@' marks an abstract socket).

        `watchdog_usec` is WATCHDOG_USEC already checked against WATCHDOG_PID; None means
        systemd runs no watchdog for us.
        """
        self._address = _socket_address(address) if address else None
        self._watchdog_usec = watchdog_usec if watchdog_usec and watchdog_usec > 0 else None
        self._stopping = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Notifier:
        """Build a notifier from NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID."""
        env = os.environ if environ is None else environ
        usec: int | None = None
        # WATCHDOG_PID names the process the watchdog is meant for. A child that inherited the
        # variables (a wrapper script, say) must not ping on the real main process's behalf.
        watchdog_pid = env.get("WATCHDOG_PID")
        if watchdog_pid is None or watchdog_pid.strip() == str(os.getpid()):
            with contextlib.suppress(ValueError):
                usec = int(env.get("WATCHDOG_USEC", ""))
        return cls(env.get("NOTIFY_SOCKET") or None, watchdog_usec=usec)

    @property
    def enabled(self) -> bool:
        """True when there is a socket to send to."""
        return self._address is not None

    def notify(self, *assignments: str) -> bool:
        """Send `KEY=value` assignments in one datagram; True if it was sent.

        Errors are swallowed: a lost notification must never take the daemon down, and
        systemd's own watchdog is the backstop if pings stop arriving.
        """
        if self._address is None or not assignments:
            return False
        payload = "\n".join(assignments).encode()
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
                # Non-blocking: if systemd's queue is full we drop the message rather than
                # stall the event loop that called us.
                sock.setblocking(False)
                sock.sendto(payload, self._address)
        except OSError:
            return False
        return True

    def ready(self) -> bool:
        """Tell systemd start-up is finished (Type=notify waits for this)."""
        return self.notify("READY=1")

    def status(self, text: str) -> bool:
        """Set the one-line status shown by `systemctl status` ("stopping: ..." once a
        shutdown has begun)."""
        return self.notify(self._status(text))

    def stopping(self, text: str) -> bool:
        """Tell systemd a shutdown has begun, so it does not mistake it for a hang, and
        from now on say so in the status line too."""
        self._stopping = True
        return self.notify("STOPPING=1", self._status(text))

    def _status(self, text: str) -> str:
        # A newline would end the assignment and start a new, bogus one.
        flat = " ".join(text.splitlines())
        return f"STATUS=stopping: {flat}" if self._stopping else f"STATUS={flat}"

    def watchdog(self) -> bool:
        """Ping the service watchdog."""
        return self.notify("WATCHDOG=1")

    def watchdog_interval(self) -> float | None:
        """Seconds between pings: half of WATCHDOG_USEC, as sd_watchdog_enabled(3) advises.

        None when no watchdog is set for this process (or there is no socket to ping).
        """
        if self._watchdog_usec is None or self._address is None:
            return None
        return self._watchdog_usec / 2 / 1_000_000


def _socket_address(value: str) -> str | None:
    """Turn NOTIFY_SOCKET into a sendto() address; None for forms we do not speak."""
    if value.startswith("@"):
        # Linux abstract namespace: the leading '@' stands for a NUL byte.
        return "\0" + value[1:]
    if value.startswith("/"):
        return value
    # systemd 254+ may also hand out vsock: addresses; those are for VMs, not for us.
    return None


async def watchdog_loop(notifier: Notifier, stop: asyncio.Event) -> None:
    """Send WATCHDOG=1 at once and then every interval until `stop` is set.

    Returns immediately when systemd runs no watchdog for us. Running on the event loop is
    the point: if the loop wedges, the pings stop and systemd restarts the daemon.
    """
    interval = notifier.watchdog_interval()
    if interval is None:
        return
    while not stop.is_set():
        notifier.watchdog()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), timeout=interval)
