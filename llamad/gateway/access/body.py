"""A request's body as the door reads it: UTF-8 JSON or a 400, the model it names, and
the body limit of that model.

`json.loads` takes bytes in UTF-16 or 32 too (it guesses from the first bytes), and
llama-server does not: such a body came back as its 500. Here a body is decoded as
UTF-8, strictly, before it is parsed, once for every route that takes JSON, and it is
relayed only as it came. A string with a lone surrogate (JSON's `\\ud800` escape) is no
UTF-8 either: llama-server answered it with a 500, and what the gateway writes anew
(Ollama's requests, shaped ones) could not be written. `NaN` and `Infinity`, which
Python's parser takes and JSON does not, came back as llama-server's 500 too. The
messages are each family's own (Ollama's are Ollama's).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import Scope

from llamad.gateway.access.call import query
from llamad.gateway.access.limits import GatewayLimits
from llamad.gateway.access.refusal import Refusal, bad, too_large
from llamad.gateway.access.schemas import check as check_schemas
from llamad.gateway.access.table import Body, Route
from llamad.gateway.contract.families import family
from llamad.gateway.contract.shapes import valid_text


def _no_constant(name: str) -> Any:
    raise bad(f"the request body is not JSON: {name} is no JSON value")


# One decoder for every body, made once: `json.loads` with an argument of its own would
# make a new one per request.
_DECODER = json.JSONDecoder(parse_constant=_no_constant)


def parse(body: bytes, ollama: bool) -> Any:
    """The JSON document of `body`: any value (None for no body) on OpenAI's and
    Anthropic's routes, which say what is missing; an object on Ollama's."""
    doc = _document(body, ollama)
    # Only a body with a surrogate's escape (rare: an astral character from a client
    # that writes ASCII) is written out to look closer.
    escaped = b"\\ud" in body or b"\\uD" in body
    if escaped and not valid_text(json.dumps(doc, ensure_ascii=False)):
        raise bad("the request body holds a lone surrogate (a \\ud800 escape), which is no text")
    return doc


def _document(body: bytes, ollama: bool) -> Any:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise bad("the request body is not UTF-8 JSON") from None
    if ollama:
        if not text.strip():
            raise bad("missing request body")
        try:
            doc = _DECODER.decode(text)
        except ValueError as exc:
            raise bad(f"invalid JSON in request body: {exc}") from None
        except RecursionError:
            raise bad("invalid JSON in request body: nested too deeply") from None
        if not isinstance(doc, dict):
            raise bad("request body must be a JSON object")
        return doc
    if not text:
        return None
    try:
        return _DECODER.decode(text)
    except ValueError:
        raise bad("the request body is not JSON") from None
    except RecursionError:
        raise bad("the request body is nested too deeply") from None


def _from_body(doc: Any, ollama: bool) -> str:
    if not ollama:
        model = doc.get("model") if isinstance(doc, dict) else None
        if not isinstance(model, str) or not model:
            raise bad("the request body has no `model`; GET /v1/models lists them")
        if not valid_text(model):
            raise bad("`model` is not valid Unicode (a lone surrogate)")
        return model
    # Ollama's `model`, or its older `name`.
    for key in ("model", "name"):
        value = doc.get(key)
        if value is not None and not isinstance(value, str):
            raise bad(f"{key!r} has the wrong type: {json.dumps(value)[:80]}")
        if value:
            if not valid_text(value):
                raise bad("model is not valid Unicode (a lone surrogate)")
            return value
    raise bad("model is required")


def named(route: Route, scope: Scope, params: dict[str, str], doc: Any) -> str:
    """The model the request names where `route` says, or a 400 saying what is missing."""
    where = route.model
    if where == "body":
        return _from_body(doc, family(scope["path"]) == "ollama")
    if where == "query":
        model = query(scope, "model")
        if not model:
            raise bad("add ?model=NAME to say which model's props you want")
        return model
    return params[where] if where else ""


def decide(
    route: Route, scope: Scope, params: dict[str, str], body: bytes, limits: GatewayLimits
) -> tuple[Any, str]:
    """The parsed body (None for a route that takes no JSON) and the model it names
    ("" for a route that names none); a body over `[gateway] max_body` must be for a
    model that allows it (413 before any other refusal)."""
    doc, model, refusal = None, "", None
    try:
        if route.body is Body.JSON:
            doc = parse(body, family(scope["path"]) == "ollama")
        model = named(route, scope, params, doc)
        if route.body is not Body.NONE:
            check_schemas(body, doc)
    except Refusal as exc:
        refusal = exc
    if len(body) > limits.default:
        cap = limits.for_model(model)
        if len(body) > cap:
            raise too_large(cap)
    if refusal is not None:
        raise refusal
    return doc, model
