"""`GET /v1/models` and `GET /v1/models/{id}`: every name a client may ask for.

Aliases are entries of their own (`llamad.alias_of` names their instance) unless
`[gateway] list_aliases = false`, so an app that offers the list offers them too. Nothing
here waits on a load.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from llamad.gateway.contract.caller import Caller
from llamad.gateway.contract.port import GatewayPort, ModelView


def names(
    views: list[ModelView], aliases: bool, spelled: Callable[[str], str] = str
) -> Iterator[tuple[str, ModelView, str | None]]:
    """(name, view, alias_of) for each listed name: instances first, then their aliases,
    each spelling once (a library model answers to its quant in any case). `spelled` is
    how the listing writes a name (Ollama's adds `:latest`, making `m` and `m:latest` one)."""
    seen = set()
    for view in views:
        seen.add(spelled(view.name).casefold())
        yield view.name, view, None
    if aliases:
        for view in views:
            for alias in view.aliases:
                if (key := spelled(alias).casefold()) not in seen:
                    seen.add(key)
                    yield alias, view, view.name


def model_entry(
    view: ModelView, created: int, name: str | None = None, alias_of: str | None = None
) -> dict[str, Any]:
    """One `/v1/models` entry: OpenAI's fields, then llamad's."""
    extra: dict[str, Any] = {"alias_of": alias_of} if alias_of else {}
    return {
        "id": name or view.name,
        "object": "model",
        "created": created,
        "owned_by": f"llamad@{view.host}" if view.host else "llamad",
        "llamad": {
            "state": view.state,
            "loaded": view.loaded,
            "on_demand": view.on_demand,
            "aliases": list(view.aliases),
            **extra,
            "idle_timeout": view.idle_timeout,
            "expires_at": view.expires_at,
            "size_bytes": view.size_bytes,
            "load_progress": view.load_progress,
            "replicas": list(view.replicas),
        },
    }


def models(gateway: GatewayPort, created: int, aliases: bool, caller: Caller) -> dict[str, Any]:
    """The `/v1/models` document: the models `caller` may use."""
    listed = names(gateway.models(caller), aliases)
    return {"object": "list", "data": [model_entry(v, created, n, a) for n, v, a in listed]}


def model(gateway: GatewayPort, created: int, name: str) -> dict[str, Any] | None:
    """The `/v1/models/{name}` object for an instance name or alias, or None."""
    view = gateway.find(name)
    if view is None:
        return None
    return model_entry(view, created, name, view.name if name != view.name else None)
