"""Pulling a model from Ollama's registry into llamad's own Ollama-layout store: the
manifest, then each blob (resumed from a `-partial` file, verified by digest, renamed into
place), the manifest written last, so a model is never seen half-pulled."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path
from typing import Any

import httpx

from llamad.library.digest import file_sha256
from llamad.library.ollama_layers import PARAMS
from llamad.library.ollama_store import DEFAULT_HOST, MAX_MANIFEST, MODEL, PROJECTOR, blob_path
from llamad.library.progress import FileProgress, Oversize, PullError, Report, status
from llamad.library.redirects import check_redirect
from llamad.library.refs import OllamaRef
from llamad.library.space import check_space, disk_full, is_full

_ACCEPT = "application/vnd.docker.distribution.manifest.v2+json"
_USABLE = {MODEL, PROJECTOR, PARAMS} | {
    f"application/vnd.ollama.image.{t}" for t in ("template", "system", "license", "messages")
}
_CHUNK = 1 << 20
# A cut download resumes where it stopped, this many times, before the pull fails.
_ATTEMPTS = 3


def pull_ollama(ref: OllamaRef, registry: str, store: Path, report: Report) -> Path:
    """Pull `ref` from `registry` into `store`; returns the manifest's path."""
    base = f"{registry}/v2/{ref.namespace}/{ref.model}"
    # Blobs are redirected to a CDN; check_redirect refuses any other place to go.
    hooks = {"response": [check_redirect]}
    timeout = httpx.Timeout(30, read=60)
    with httpx.Client(timeout=timeout, follow_redirects=True, event_hooks=hooks) as client:
        status(report, "pulling manifest")
        manifest, raw = _manifest(client, f"{base}/manifests/{ref.tag}", ref)
        layers = (
            [manifest["config"], *manifest["layers"]]
            if "config" in manifest
            else manifest["layers"]
        )
        kinds = {str(x.get("mediaType")) for x in manifest["layers"]}
        if MODEL not in kinds or kinds - _USABLE:
            odd = ", ".join(sorted(kinds - _USABLE)) or "no model layer"
            raise PullError(f"{ref.name}: llama-server cannot load this model ({odd})")
        store.mkdir(parents=True, exist_ok=True)
        check_space(store, sum(int(x["size"]) for x in layers if not _present(store, x)))
        for layer in layers:
            _blob(client, base, store, layer, report)
    status(report, "writing manifest")
    target = store / "manifests" / DEFAULT_HOST / ref.namespace / ref.model / ref.tag
    _write_atomic(target, raw)
    return target


def _manifest(client: httpx.Client, url: str, ref: OllamaRef) -> tuple[dict[str, Any], bytes]:
    try:
        with client.stream("GET", url, headers={"Accept": _ACCEPT}) as resp:
            code = resp.status_code
            raw = _bounded(resp, MAX_MANIFEST) if code == 200 else b""
    except httpx.HTTPError as exc:
        raise PullError(f"{ref.name}: cannot reach the registry: {exc}") from None
    if code == 404:
        raise PullError(
            f"{ref.name}: no such model in Ollama's registry "
            "(pull model manifest: file does not exist)"
        )
    if code != 200:
        raise PullError(f"{ref.name}: the registry answered {code}")
    if raw is None:
        raise PullError(f"{ref.name}: the registry's manifest is larger than {MAX_MANIFEST} bytes")
    try:
        doc = json.loads(raw)
    except ValueError:
        raise PullError(f"{ref.name}: the registry's manifest is not JSON") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("layers"), list):
        raise PullError(f"{ref.name}: the registry's manifest has no layers")
    for layer in [doc.get("config", {}), *doc["layers"]]:
        if not isinstance(layer, dict) or blob_path(Path("."), str(layer.get("digest"))) is None:
            raise PullError(f"{ref.name}: the manifest names a malformed digest")
        size = layer.get("size")
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            # The size is what the space check counts and what a download is held to.
            raise PullError(f"{ref.name}: the manifest gives a layer no size")
    return doc, raw


def _bounded(resp: httpx.Response, limit: int) -> bytes | None:
    """The body, or None once it passes `limit` bytes (read no further)."""
    body = bytearray()
    for chunk in resp.iter_bytes():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


def _present(store: Path, layer: dict[str, Any]) -> bool:
    path = blob_path(store, str(layer["digest"]))
    return path is not None and path.is_file() and path.stat().st_size == int(layer["size"])


def _blob(
    client: httpx.Client, base: str, store: Path, layer: dict[str, Any], report: Report
) -> None:
    digest, size = str(layer["digest"]), int(layer["size"])
    final = blob_path(store, digest)
    assert final is not None  # checked with the manifest
    progress = FileProgress(report, digest, size)
    if _present(store, layer):
        progress.set(size, force=True)
        return
    final.parent.mkdir(parents=True, exist_ok=True)
    partial = final.with_name(final.name + "-partial")
    for attempt in range(1, _ATTEMPTS + 1):
        try:
            _fetch(client, f"{base}/blobs/{digest}", partial, size, progress)
            break
        except Oversize:
            partial.unlink(missing_ok=True)
            raise
        except httpx.HTTPError as exc:
            if attempt == _ATTEMPTS:
                raise PullError(f"{digest}: download cut ({exc}); pull again to resume") from None
        except OSError as exc:
            if is_full(exc):
                raise disk_full(digest, store, partial) from None
            raise
    status(report, "verifying sha256 digest")
    got = "sha256:" + file_sha256(partial)
    if got != digest:
        partial.unlink()
        raise PullError(f"{digest}: sha256 mismatch (got {got}); the partial file was removed")
    os.replace(partial, final)


def _fetch(
    client: httpx.Client, url: str, partial: Path, size: int, progress: FileProgress
) -> None:
    """Download into `partial`, from where an earlier attempt stopped."""
    have = _resumable(partial, size)
    headers = {"Range": f"bytes={have}-"} if have else {}
    progress.set(have, force=True)
    with client.stream("GET", url, headers=headers) as resp:
        if resp.status_code not in (200, 206):
            raise PullError(f"{url}: the registry answered {resp.status_code}")
        append = resp.status_code == 206  # 200: the server started over
        done = have if append else 0
        # Never through a link someone left at the partial's name.
        flags = os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC
        flags |= os.O_APPEND if append else os.O_TRUNC
        with os.fdopen(os.open(partial, flags, 0o644), "wb") as f:
            for chunk in resp.iter_bytes(_CHUNK):
                done += len(chunk)
                progress.set(done)  # Oversize before a byte past the declared size is kept
                f.write(chunk)


def _resumable(partial: Path, size: int) -> int:
    """The bytes of `partial` to resume from; one that is no regular file of ours (a
    FIFO, a link) or longer than the blob goes, and the download starts over."""
    try:
        st = partial.lstat()
    except FileNotFoundError:
        return 0
    if stat.S_ISREG(st.st_mode) and st.st_size <= size:
        return st.st_size
    partial.unlink()
    return 0


def _write_atomic(target: Path, data: bytes) -> None:
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, target)
