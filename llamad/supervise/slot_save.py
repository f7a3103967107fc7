"""One slot saved: written under a part name, made the slot's file only whole.

llama-server writes the save as `slot-N.part`; once it holds every byte llama-server
said it wrote (a full disk cuts a save short, and llama-server still answers 200), the
slot's old file is set aside as a kept conversation and the part becomes its file, with
its sidecar (and the sha256 of its bytes, taken from the part before), in one step with
no await between: whatever lists, clears or prunes the cache meanwhile sees the old pair
or the new one, never half of each.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import structlog

from llamad.backends.local_http import Client
from llamad.backends.spec import InstanceSpec
from llamad.supervise import slot_files as files
from llamad.supervise import slot_http as http
from llamad.supervise import slot_kept as kept
from llamad.supervise.slot_restore import refused

log = structlog.get_logger("llamad.cache")


async def save_slot(
    client: Client, spec: InstanceSpec, directory: Path, number: int, fit: dict[str, Any],
    cause: str,
) -> tuple[float, int]:  # fmt: skip
    """Save slot `number` of `spec`'s server: (how long llama-server was kept writing,
    the bytes kept; 0 when nothing was: an empty slot, or a save refused)."""
    t0 = time.perf_counter()
    status, body = await http.post(client, spec, number, "save", files.part_name(number))
    # llama-server holds a save until the slot is idle: a request that came first is no
    # part of what the save cost it.
    timings = body.get("timings")
    server = timings.get("save_ms") if isinstance(timings, dict) else None
    seconds = server / 1000 if isinstance(server, int | float) else time.perf_counter() - t0
    tokens = int(body.get("n_saved", 0)) if status == 200 else 0
    size = int(body.get("n_written", 0))
    why = http.error(status, body) if status != 200 else None
    if tokens and why is None:
        why = files.whole(directory, number, size)
    part = directory / files.part_name(number)
    sha256 = None
    if tokens and why is None:
        try:
            # Off the loop: a long context's file is gigabytes.
            sha256 = await asyncio.to_thread(files.content_digest, part)
        except OSError as exc:
            why = f"cannot read it: {exc.strerror}"
    if tokens == 0 or why is not None:
        files.drop_parts(directory, number)
        if why is not None:
            refused(spec, "save", why, slot=number)
        return seconds, 0
    ids = kept.tokens(part)
    digest = None if ids is None else kept.digest(ids)
    kept.set_aside(directory, number)
    files.keep(directory, number)
    files.record(directory, number, fit, tokens, size, digest, sha256)
    for gone in kept.superseded(directory, ids or b""):
        log.info("cache.superseded", instance=spec.name, slot=gone.slot, by=number)
    ms = round((time.perf_counter() - t0) * 1000, 1)
    log.info("cache.saved", instance=spec.name, slot=number, tokens=tokens, bytes=size,
             ms=ms, server_ms=server, why=cause)  # fmt: skip
    return seconds, size
