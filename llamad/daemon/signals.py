"""The daemon's signals: SIGTERM and SIGINT stop it, a second SIGINT kills every child,
SIGHUP reloads the config."""

from __future__ import annotations

import asyncio
import signal
from collections.abc import Callable

import structlog

from llamad.supervise.supervisor import Supervisor

log = structlog.get_logger("llamad.daemon")


class SignalHandlers:
    """SIGTERM/SIGINT set the trigger; a second SIGINT kills every child; SIGHUP reloads."""

    def __init__(self, trigger: asyncio.Event, sup: Supervisor) -> None:
        self._loop = asyncio.get_running_loop()
        self._trigger, self._sup = trigger, sup
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._loop.add_signal_handler(sig, self._on_signal, sig)
        # SIGHUP's default ends the process: from the start it is caught, and a hangup
        # that comes before the reloader exists is kept for it.
        self._reload: Callable[[], None] | None = None
        self._hung_up = False
        self._loop.add_signal_handler(signal.SIGHUP, self._on_hangup)

    def on_hangup(self, reload: Callable[[], None]) -> None:
        """SIGHUP asks for a reload, once the reloader exists; an earlier one is kept."""
        self._reload = reload
        if self._hung_up:
            reload()

    def _on_hangup(self) -> None:
        log.info("daemon.signal", signal="SIGHUP")
        if self._reload is None:
            self._hung_up = True
        else:
            self._reload()

    def _on_signal(self, sig: signal.Signals) -> None:
        if self._trigger.is_set() and sig is signal.SIGINT:
            log.warning("daemon.forced", signal=sig.name)
            self._sup.kill_all()
            return
        log.info("daemon.signal", signal=sig.name)
        self._trigger.set()

    def remove(self) -> None:
        """Back to the default handlers (shutdown)."""
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            self._loop.remove_signal_handler(sig)
