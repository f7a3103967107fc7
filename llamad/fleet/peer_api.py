"""Asking a `[fleet]` peer's control API, over TCP with its bearer token."""

from __future__ import annotations

import asyncio
import json
import ssl
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from llamad.common.tokenfile import TokenFileError, read_token

# A status document with hundreds of instances is well under this.
MAX_ANSWER = 8 << 20


class PeerUnreachable(Exception):
    """The peer could not be asked (network, TLS, token); the message says why."""


@dataclass(frozen=True)
class Fetched:
    """A peer's answer: 200 with its document, 304 (`If-None-Match` matched), or 404."""

    status: int
    doc: Any = None
    etag: str | None = None


async def get_json(
    url: str, path: str, token_file: Path | None, ca_file: Path | None, timeout: float
) -> Any:
    """`GET url/path` as JSON; None for a 404; PeerUnreachable for anything else amiss."""
    return (await fetch(url, path, token_file, ca_file, timeout)).doc


async def fetch(
    url: str,
    path: str,
    token_file: Path | None,
    ca_file: Path | None,
    timeout: float,
    etag: str | None = None,
) -> Fetched:
    """`GET url/path`, conditional on `etag` when given; PeerUnreachable for any answer
    but 200, 304 and 404, and for anything else amiss."""
    # Imported here: the daemon loads this module before its first launch, and httpx
    # only once a probe or a peer needs it.
    import httpx

    headers = {} if etag is None else {"If-None-Match": etag}
    try:
        if token_file is not None:
            headers["Authorization"] = f"Bearer {read_token(token_file)}"
        # Whole, not per read: a peer dripping its answer would hold the fleet's refresh.
        async with (
            asyncio.timeout(2 * timeout),
            httpx.AsyncClient(
                verify=tls_context(ca_file), timeout=timeout, trust_env=False
            ) as client,
            client.stream("GET", f"{url.rstrip('/')}{path}", headers=headers) as response,
        ):
            if response.status_code in (304, 404):
                return Fetched(response.status_code, etag=response.headers.get("etag"))
            if response.status_code != 200:
                raise PeerUnreachable(f"{url} answered HTTP {response.status_code}")
            body = bytearray()
            async for chunk in response.aiter_bytes():
                body += chunk
                if len(body) > MAX_ANSWER:  # a peer cannot fill this daemon's memory
                    raise PeerUnreachable(f"{url}: its answer is larger than {MAX_ANSWER} bytes")
        return Fetched(200, json.loads(body), response.headers.get("etag"))
    except (httpx.HTTPError, TokenFileError, OSError, ValueError) as exc:
        raise PeerUnreachable(f"{url}: {str(exc) or type(exc).__name__}") from None


@lru_cache(maxsize=16)
def tls_context(ca_file: Path | None) -> ssl.SSLContext:
    """Built once per CA file: loading a CA bundle costs tens of ms, and we poll."""
    return ssl.create_default_context(cafile=str(ca_file) if ca_file else None)
