"""A key limited to some models sees nothing else: a model outside its list is answered
as a model that does not exist (404), the list in that answer holds only its own, and
the library (pull, delete, the store) is not its to change (403)."""

from __future__ import annotations

from typing import Protocol

from llamad.gateway.access.refusal import Refusal
from llamad.gateway.contract.caller import Caller
from llamad.gateway.contract.families import family
from llamad.gateway.contract.port import ModelView, UnknownModel


class Models(Protocol):
    """What the door asks of the gateway's models (`port.GatewayPort` has it)."""

    def instances(self, name: str) -> tuple[str, ...] | None: ...

    def models(self, caller: Caller) -> list[ModelView]: ...


def may_use(models: Models, caller: Caller, name: str) -> bool:
    """`caller` may use the model `name` means: every instance behind it (an alias that
    replicas share means them all; `m:latest` means `m`, as `instances` resolves it)."""
    if not caller.scoped:
        return True
    found = models.instances(name)
    return found is not None and caller.may_use_all(found)


def visible(models: Models, caller: Caller) -> list[str]:
    """Every name (instance or alias) `caller` may ask for, each once."""
    return list(dict.fromkeys(n for v in models.models(caller) for n in (v.name, *v.aliases)))


def unknown(models: Models, caller: Caller, name: str, path: str) -> Refusal:
    """The 404 for a model `caller` may not see, as its family answers one that does
    not exist."""
    if family(path) == "ollama":
        message = f'model "{name}" not found'
    else:
        message = UnknownModel(name, visible(models, caller)).message
    return Refusal(404, "model_not_found", message, model=name)


def not_for_scoped(caller: Caller) -> Refusal:
    """403 for a key limited to some models asking to change the library, or a model's
    slots or adapters."""
    message = (
        f"the key {caller.name!r} is limited to some models: it may not change the library,"
        " nor a model's slots or adapters"
    )
    return Refusal(403, "forbidden", message)
