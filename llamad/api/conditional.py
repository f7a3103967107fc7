"""Conditional GETs (RFC 9110 13.1.2): a JSON document with its ETag, and 304 with no
body to a client whose `If-None-Match` names it.

For documents asked for over and over that rarely change (the peer document, which
every gateway of a fleet asks every 5 s): the client still learns at once that nothing
changed, without the body on the wire nor its parsing.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from starlette.requests import Request
from starlette.responses import Response


def conditional_json(request: Request, doc: Any) -> Response:
    """`doc` as JSON with a strong ETag (a digest of the body), or 304 when the request's
    `If-None-Match` lists that tag (or `*`)."""
    # As JSONResponse renders: the same bytes, so the tag follows what is sent.
    body = json.dumps(doc, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode()
    etag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
    headers = {"etag": etag, "cache-control": "no-cache"}
    if _matches(request.headers.get("if-none-match"), etag):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type="application/json", headers=headers)


def _matches(header: str | None, etag: str) -> bool:
    """If-None-Match's weak comparison: a listed tag equal to ours, `W/` or not."""
    if header is None:
        return False
    tags = [t.strip().removeprefix("W/") for t in header.split(",")]
    return "*" in tags or etag in tags
