"""Leasing a model only a `[fleet]` peer serves: the request goes to that peer's gateway."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.contract.port import (
    GatewayError,
    Record,
    Unavailable,
    UnknownModel,
    Upstream,
    UpstreamError,
)
from llamad.gateway.fleet.models import FleetModels, PeerModels
from llamad.gateway.fleet.peer_models import RemoteModel
from llamad.gateway.models.router import Router
from llamad.gateway.replicas.peer_upstream import remote_upstream


class FleetLease:
    """The fleet's models as routes see them, and leases on them."""

    def __init__(
        self,
        fleet: FleetModels | None,
        settings: Callable[[], GatewayConfig],
        router: Router,
        pending: Callable[[str], GatewayError | None] | None,
        sender: str,
    ) -> None:
        self.fleet, self.settings, self.router = fleet, settings, router
        # Why a name no model answers to is not served yet (a pull under way), else None:
        # asked only on that miss path, never for a routed request.
        self.pending = pending
        self.sender = sender  # this gateway's id, in the hop header peers see
        self.relaying = 0  # requests relayed to peers now: this host must stay up for them

    def models(self) -> list[tuple[PeerModels, RemoteModel]]:
        """Every model the fleet's peers serve, when `[gateway] fleet` is on."""
        return self.fleet.models() if self.fleet and self.settings().fleet else []

    @asynccontextmanager
    async def lease(self, name: str, tally: Record | None = None) -> AsyncIterator[Upstream]:
        """Pick a peer serving `name` and relay to its gateway; a peer that fails is
        marked away, so the next request goes elsewhere."""
        if self.fleet is None or not self.settings().fleet:
            raise self.unknown(name, self.router.names())
        picked = await self.fleet.pick(name)
        if isinstance(picked, list):
            if picked:
                hosts = ", ".join(e.peer.name for e in picked)
                raise Unavailable(f"model {name!r} is served by {hosts}, which does not answer")
            known = self.router.names() + [
                n for e, m in self.models() for n in (m.name, *m.aliases)
            ]
            raise self.unknown(name, known)
        entry, model = picked
        if tally is not None:
            tally.instance, tally.host = model.name, entry.peer.name
        self.relaying += 1
        try:
            yield remote_upstream(entry, model, self.sender)
        except UpstreamError as exc:
            # The peer went away since we last asked: say which host, and send the next
            # request elsewhere.
            self.fleet.mark_away(entry.peer.name, exc.message)
            raise Unavailable(f"model {name!r} on {entry.peer.name}: {exc.message}") from None
        finally:
            self.relaying -= 1

    def unknown(self, name: str, known: list[str]) -> GatewayError:
        """The error for a name nothing serves: a pull under way, or an unknown model."""
        why = self.pending(name) if self.pending is not None else None
        return why if why is not None else UnknownModel(name, known)
