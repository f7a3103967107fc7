"""Refusals the gateway writes itself, before any route runs (a limit, an origin, a key),
in the shape of the family their path belongs to (`contract/families.py`), so each client can read
them; and a check that text can be written at all."""

from __future__ import annotations

import math

from starlette.types import Send

from llamad.gateway.contract.families import gateway_shape


async def refuse(
    send: Send,
    path: str,
    status: int,
    code: str,
    message: str,
    retry_after: float | None = None,
    headers: list[tuple[bytes, bytes]] | None = None,
) -> None:
    """Answer `status` in `path`'s family shape (with Retry-After when given)."""
    body = gateway_shape(path, status, code, message)
    out = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    if retry_after is not None:
        out.append((b"retry-after", str(max(1, math.ceil(retry_after))).encode()))
    out += headers or []
    await send({"type": "http.response.start", "status": status, "headers": out})
    await send({"type": "http.response.body", "body": body})


def valid_text(text: str) -> bool:
    """`text` can be written as UTF-8: JSON's `\\ud800` escapes make strings that cannot."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
