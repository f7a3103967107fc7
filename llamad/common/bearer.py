"""Reading `Authorization: Bearer TOKEN`: one rule for the gateway's keys and the remote
control API's tokens. The scheme is matched in any case (RFC 7235, 2.1: "bearer" and
"BEARER" are the same scheme), the token as sent."""

from __future__ import annotations


def bearer_token(value: bytes) -> bytes | None:
    """The token of an Authorization header's `value`, or None for another scheme or
    none at all."""
    scheme, _, token = value.strip().partition(b" ")
    token = token.strip()
    if scheme.lower() != b"bearer" or not token:
        return None
    return token
