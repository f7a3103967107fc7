"""A local stand-in for the Hugging Face hub and Ollama's registry: the routes
huggingface_hub and an Ollama pull call, on loopback, serving files the test gives it,
with sha256 and ETag headers as the real ones send them, and a switch to cut a download
midway."""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from helpers import free_port, wait_for
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from llamad.listener.limits import Limits
from llamad.listener.tcp import serve_tcp

COMMIT = "c0ffee" + "0" * 34


@dataclass
class Hub:
    """Repos (repo id -> file name -> bytes), Ollama models (name:tag -> layers), faults."""

    repos: dict[str, dict[str, bytes]] = field(default_factory=dict)
    ollama: dict[str, list[tuple[str, bytes]]] = field(default_factory=dict)
    claimed_sha: dict[str, str] = field(default_factory=dict)  # file -> the sha to announce
    claimed_size: dict[str, int] = field(default_factory=dict)
    served_instead: dict[str, bytes] = field(default_factory=dict)  # Ollama digest -> bytes
    cut_after: dict[str, int] = field(default_factory=dict)  # file -> bytes before a cut
    # file -> bytes sent before the download waits for `released` (a pull held midway)
    hold_after: dict[str, int] = field(default_factory=dict)
    released: threading.Event = field(default_factory=threading.Event)
    # file -> zero bytes streamed after its own (no Content-Length), a server sending more
    # than its listing or manifest declares; `sent` counts what it got out.
    oversend: dict[str, int] = field(default_factory=dict)
    sent: dict[str, int] = field(default_factory=dict)
    ended: set[str] = field(default_factory=set)  # oversent files whose stream has ended
    ranges: list[str] = field(default_factory=list)  # Range headers seen
    auths: list[str] = field(default_factory=list)  # Authorization headers seen
    paths: list[str] = field(default_factory=list)  # every request's path, in order
    redirects: dict[str, str] = field(default_factory=dict)  # path -> a 307's Location
    url: str = ""

    def blobs(self) -> dict[str, bytes]:
        """Every Ollama blob by digest."""
        return {_digest(data): data for layers in self.ollama.values() for _, data in layers}

    def app(self) -> ASGIApp:
        inner = Starlette(
            routes=[
                Route("/api/models/{user}/{repo}", self.info),
                Route("/api/models/{user}/{repo}/revision/{rev:path}", self.info),
                Route(
                    "/{user}/{repo}/resolve/{rev}/{file:path}",
                    self.resolve,
                    methods=["GET", "HEAD"],
                ),
                Route("/v2/{ns}/{model}/manifests/{tag}", self.manifest),
                Route("/v2/{ns}/{model}/blobs/{digest}", self.blob),
            ]
        )

        async def logged(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == "http":
                self.paths.append(scope["path"])
                if scope["path"] in self.redirects:
                    to = RedirectResponse(self.redirects[scope["path"]], 307)
                    return await to(scope, receive, send)
            await inner(scope, receive, send)

        return logged

    async def info(self, request: Request) -> Response:
        self.auths.append(request.headers.get("authorization", ""))
        repo = f"{request.path_params['user']}/{request.path_params['repo']}"
        files = self.repos.get(repo)
        if files is None:
            return JSONResponse(
                {"error": "Repository not found"}, 404, {"X-Error-Code": "RepoNotFound"}
            )
        siblings = [
            {
                "rfilename": name,
                "size": self.claimed_size.get(name, len(data)),
                "blobId": hashlib.sha1(data).hexdigest(),
                "lfs": {
                    "size": self.claimed_size.get(name, len(data)),
                    "sha256": self.claimed_sha.get(name, hashlib.sha256(data).hexdigest()),
                    "pointerSize": 134,
                },
            }
            for name, data in files.items()
        ]
        return JSONResponse(
            {
                "id": repo,
                "modelId": repo,
                "sha": COMMIT,
                "siblings": siblings,
                "private": False,
                "tags": [],
            }
        )

    async def resolve(self, request: Request) -> Response:
        self.auths.append(request.headers.get("authorization", ""))
        p = request.path_params
        data = self.repos.get(f"{p['user']}/{p['repo']}", {}).get(p["file"])
        if data is None:
            return JSONResponse(
                {"error": "Entry not found"},
                404,
                {"X-Error-Code": "EntryNotFound", "X-Repo-Commit": COMMIT},
            )
        sha = self.claimed_sha.get(p["file"], hashlib.sha256(data).hexdigest())
        headers = {
            "X-Repo-Commit": COMMIT,
            "ETag": f'"{sha}"',
            "X-Linked-Etag": f'"{sha}"',
            "X-Linked-Size": str(len(data)),
            "Accept-Ranges": "bytes",
        }
        return self._ranged(request, data, headers, p["file"])

    async def manifest(self, request: Request) -> Response:
        p = request.path_params
        key = (
            f"{p['model']}:{p['tag']}"
            if p["ns"] == "library"
            else f"{p['ns']}/{p['model']}:{p['tag']}"
        )
        layers = self.ollama.get(key)
        if layers is None:
            return JSONResponse({"errors": [{"code": "MANIFEST_UNKNOWN"}]}, 404)
        doc = {
            "schemaVersion": 2,
            "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
            "config": _layer("application/vnd.docker.container.image.v1+json", b"{}"),
            "layers": [_layer(m, d) for m, d in layers],
        }
        return Response(
            json.dumps(doc), media_type="application/vnd.docker.distribution.manifest.v2+json"
        )

    async def blob(self, request: Request) -> Response:
        digest = request.path_params["digest"]
        data = {**self.blobs(), _digest(b"{}"): b"{}", **self.served_instead}.get(digest)
        if data is None:
            return JSONResponse({"errors": [{"code": "BLOB_UNKNOWN"}]}, 404)
        return self._ranged(request, data, {"Accept-Ranges": "bytes"}, digest)

    def _ranged(self, request: Request, data: bytes, headers: dict[str, str], key: str) -> Response:
        start, status = 0, 200
        if rng := request.headers.get("range"):
            self.ranges.append(rng)
            start = int(rng.removeprefix("bytes=").split("-")[0])
            status = 206
            headers["Content-Range"] = f"bytes {start}-{len(data) - 1}/{len(data)}"
        body = data[start:]
        headers["Content-Length"] = str(len(body))
        if request.method == "HEAD":
            return Response(b"", status, headers)
        if key in self.oversend:
            del headers["Content-Length"]
            return StreamingResponse(self._padded(request, body, key), status, headers)
        cut = self.cut_after.pop(key, None)
        hold = self.hold_after.pop(key, None)
        if hold is not None:
            return StreamingResponse(_held(body, hold, self.released), status, headers)
        return StreamingResponse(_send(body, cut), status, headers)

    async def _padded(self, request: Request, body: bytes, key: str) -> AsyncIterator[bytes]:
        self.sent[key] = 0
        try:
            yield body
            self.sent[key] += len(body)
            left = self.oversend[key]
            while left > 0 and not await request.is_disconnected():
                n = min(left, 1 << 20)
                yield bytes(n)  # counted once the client (or the sockets' buffers) took it
                self.sent[key] += n
                left -= n
        finally:
            self.ended.add(key)


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _layer(media: str, data: bytes) -> dict[str, Any]:
    return {"mediaType": media, "digest": _digest(data), "size": len(data)}


async def _send(body: bytes, cut: int | None) -> AsyncIterator[bytes]:
    if cut is None:
        yield body
        return
    yield body[:cut]
    # The cut comes once the client has taken those bytes in (else it reads them and the
    # reset together, keeps nothing and starts over): a pause, not a synchronisation.
    await asyncio.sleep(0.3)
    # Ended short of its Content-Length: the listener closes the connection mid-answer.


async def _held(body: bytes, hold: int, released: threading.Event) -> AsyncIterator[bytes]:
    yield body[:hold]
    await asyncio.to_thread(released.wait, 60)  # bounded: a test that fails never hangs
    yield body[hold:]


@contextmanager
def serving(hub: Hub) -> Iterator[Hub]:
    """Serve `hub` on loopback in a thread for the block; its URL in `hub.url`."""
    port, bound = free_port(), threading.Event()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    served = serve_tcp(hub.app(), "127.0.0.1", port, stop, bound.set, cap=64, limits=Limits)
    thread = threading.Thread(target=loop.run_until_complete, args=(served,), daemon=True)
    thread.start()
    try:
        wait_for(bound.is_set, 10, "the hub stand-in listening")
        hub.url = f"http://127.0.0.1:{port}"
        yield hub
    finally:
        hub.released.set()
        loop.call_soon_threadsafe(stop.set)
        thread.join(10)
        if not thread.is_alive():
            loop.close()
