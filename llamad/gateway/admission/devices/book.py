"""The owner of the device reading: discovered once (llama-server's list, refined by the
vendor tools), refreshed before each decision where a vendor tool reads free memory now,
and each device's budget from it."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping

import structlog

from llamad.backends.devices.probe import Machine, discover, refresh
from llamad.backends.devices.readings import Device
from llamad.backends.tool import ServerCommand
from llamad.gateway.admission.memory import margin

log = structlog.get_logger("llamad.devices")

Discover = Callable[[ServerCommand], Awaitable[Machine]]
Refresh = Callable[[Machine], Awaitable[Machine]]


class DeviceBook:
    """The devices as last read, and what our models held on each at that reading (so a
    budget is the device's memory without them: free then, plus theirs then).

    `server` names the llama-server that lists the devices (None: none configured, so
    RAM only). The book alone writes its fields."""

    def __init__(
        self,
        server: Callable[[], ServerCommand | None],
        discover_fn: Discover = discover,
        refresh_fn: Refresh = refresh,
    ) -> None:
        self.server, self._discover, self._refresh = server, discover_fn, refresh_fn
        self.machine = Machine()
        self._ours: Mapping[str, int] = {}
        self._read = False
        self._listed: ServerCommand | None = None
        self._listing = asyncio.Lock()  # one listing at a time; a load waits for it

    @property
    def devices(self) -> tuple[Device, ...]:
        """The devices models can be offloaded to (empty: RAM only)."""
        return self.machine.devices

    async def discover(self, ours: Callable[[Machine], Mapping[str, int]]) -> None:
        """List the devices, once (the gateway's start); `ours(machine)` says what our
        models hold on each device at that reading."""
        async with self._listing:
            if self._read:
                return
            server = self.server()
            machine = await self._discover(server) if server is not None else Machine()
            self._read, self._listed = True, server
            self._record(machine, ours)

    async def refresh(self, ours: Callable[[Machine], Mapping[str, int]]) -> None:
        """Read free memory again where a vendor tool can (a load is about to decide).
        Before the devices are listed the load waits for the listing (bounded by its
        tools' deadlines): decided on RAM alone, a model the config does not place
        would be spread over every GPU, one another program fills included. A reload
        that names another llama-server has them listed again, by it."""
        if self._read and self.server() != self._listed:
            log.info("devices.relisted", server=str(self.server()))
            self._read = False
        if not self._read:
            await self.discover(ours)
        elif self.machine.devices:
            self._record(await self._refresh(self.machine), ours)

    def _record(self, machine: Machine, ours: Callable[[Machine], Mapping[str, int]]) -> None:
        # The reading and what ours held with it are recorded in one step.
        self.machine, self._ours = machine, ours(machine)

    def budget(self, device: Device) -> int:
        """What `device` can give our models: its free memory at the reading plus what
        ours held then (not more than it has), less a margin for everything else."""
        room = min(device.total, device.free + self._ours.get(device.name, 0))
        return room - margin(room)
