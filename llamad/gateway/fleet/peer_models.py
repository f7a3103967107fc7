"""A peer's routable models, read from its status document: each instance by its name
and aliases, and an alias its instances share as one model of their slots together."""

from __future__ import annotations

from dataclasses import dataclass

# The most slots a peer's model counts for, whatever it says: parallel slots beyond this
# are no llama-server's, and a larger claim would only draw requests to that peer.
MAX_SLOTS = 64


@dataclass(frozen=True)
class RemoteModel:
    """One model a peer's gateway routes, as its status document said."""

    name: str
    aliases: tuple[str, ...]
    state: str
    loaded: bool
    on_demand: bool
    slots: int = 1  # requests it serves at once
    in_flight: int = 0  # its gateway's counts when it was asked
    queued: int = 0
    ours: int = 0  # of in_flight, those this gateway had relayed there (its count of them)


def models_of(instances: object, sender: str) -> dict[str, RemoteModel]:
    """Every routable model of a status document's `instances`, by name and alias."""
    docs = instances if isinstance(instances, list) else []
    models = [_model(doc, sender) for doc in docs]
    out = {m.name: m for m in models if m is not None}
    names = set(out)
    for model in out.copy().values():
        for alias in model.aliases:
            have = out.setdefault(alias, model)
            if have is not model and alias not in names:  # instances there share it
                out[alias] = _shared(alias, have, model)
    return out


def _model(doc: object, sender: str) -> RemoteModel | None:
    gw = doc.get("gateway") if isinstance(doc, dict) else None
    if not isinstance(doc, dict) or not isinstance(gw, dict) or not gw.get("routable"):
        return None
    state = str(doc.get("state"))
    return RemoteModel(
        str(doc.get("name")),
        tuple(a for a in gw.get("aliases", []) if isinstance(a, str)),
        state,
        state == "running",
        bool(gw.get("on_demand")),
        min(_count(gw.get("slots"), 1), MAX_SLOTS),
        _count(gw.get("in_flight"), 0),
        _count(gw.get("queued"), 0),
        _count((gw.get("relayed") or {}).get(sender), 0),
    )


def _shared(alias: str, one: RemoteModel, other: RemoteModel) -> RemoteModel:
    """An alias a peer's instances share, as one model of theirs: its gateway balances
    between them, so their slots and counts add up."""
    return RemoteModel(
        alias,
        (),
        one.state if one.loaded or not other.loaded else other.state,
        one.loaded or other.loaded,
        one.on_demand and other.on_demand,
        min(one.slots + other.slots, MAX_SLOTS),
        one.in_flight + other.in_flight,
        one.queued + other.queued,
        one.ours + other.ours,
    )


def _count(value: object, default: int) -> int:
    return (
        value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default
    )


def room_left(gateway: dict[str, object]) -> int | None:
    """What a peer has left for one more model, from its status document's `gateway`:
    with GPUs (`devices`, each with `left_bytes`), the most any one of them has left, as
    a model goes to one GPU with room (Metal's, `unified`, is RAM too: no more than
    RAM's); without, RAM's `left_bytes`. None when the peer does not say."""
    ram = gateway.get("left_bytes")
    ram = ram if isinstance(ram, int) else None
    devices = gateway.get("devices")
    gpus = []
    for device in devices if isinstance(devices, list) else []:
        left = device.get("left_bytes") if isinstance(device, dict) else None
        if isinstance(left, int):
            unified = ram is not None and device.get("unified") is True
            gpus.append(min(left, ram) if unified and ram is not None else left)
    return max(gpus) if gpus else ram
