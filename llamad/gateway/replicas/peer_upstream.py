"""A peer's model as the gateway's routes see it, and the upstream a request to it uses."""

from __future__ import annotations

from llamad.gateway.access.hop import HOP_HEADER
from llamad.gateway.contract.port import ModelView, Upstream
from llamad.gateway.fleet.models import PeerModels
from llamad.gateway.fleet.peer_models import RemoteModel


def remote_view(entry: PeerModels, model: RemoteModel) -> ModelView:
    """A peer's model as the gateway's routes see it, with its host."""
    return ModelView(
        name=model.name,
        aliases=model.aliases,
        model_path=None,
        state=model.state,
        loaded=model.loaded,
        on_demand=model.on_demand,
        idle_timeout=0.0,
        expires_at=None,
        size_bytes=None,
        ctx_size=None,
        mmproj=False,
        host=entry.peer.name,
    )


def remote_upstream(entry: PeerModels, model: RemoteModel, sender: str) -> Upstream:
    """Where a request for `model` on `entry`'s peer goes: its gateway, with its key, and
    marked relayed by `sender` (this gateway's id) so that gateway serves it itself."""
    assert entry.gateway_url is not None
    key = entry.key()
    headers = {HOP_HEADER: sender} | ({"Authorization": f"Bearer {key}"} if key else {})
    return Upstream(entry.gateway_url, headers, model.name, entry.peer.name)
