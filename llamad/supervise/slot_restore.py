"""Restoring an instance's saved files into its new process, before it is routed to.

The slots' own files go back into their slots; kept conversations (slot_kept.py), and
the files of slots this process does not have, go first, oldest first, through slot 0
into llama-server's prompt cache in memory, so slot 0 ends up holding its own. A file
that does not fit the process, that is not the bytes llamad saved (its sidecar's sha256),
or that llama-server cannot load, is refused and removed.
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

log = structlog.get_logger("llamad.cache")

# Kept conversations are restored for at most this long: the slots' own get the rest of
# the restore's budget.
KEPT_BUDGET_S = http.REQUEST_TIMEOUT_S / 2


async def restore_fitting(
    client: Client, spec: InstanceSpec, directory: Path, fit: dict[str, Any], total: int
) -> list[tuple[int, float]]:
    """Restore what `directory` holds that fits (`fit`, `total` slots) into `spec`'s
    server; returns each slot's own restore: (tokens, milliseconds)."""
    done: list[tuple[int, float]] = []
    memory = total > 0 and kept.through_memory(spec)
    began = time.perf_counter()
    for item in sorted(files.saved(directory), key=lambda i: (i.slot < total, i.used)):
        into = item.slot if item.slot < total else 0
        if into != item.slot and time.perf_counter() - began > KEPT_BUDGET_S:
            continue  # left on disk: the slots' own must still fit in the budget
        differs = sorted(k for k in fit.keys() | item.fit.keys() if fit.get(k) != item.fit.get(k))
        if item.slot >= total and not memory:
            differs.append(f"slot {item.slot} of {total}")
        if item.written != item.bytes:  # cut short on disk: llama-server dies loading it
            differs.append(f"size {item.bytes} of {item.written} bytes")
        elif not differs:
            try:
                # Off the loop, and only for a file that passed the cheap checks.
                if (why := await asyncio.to_thread(files.matches, item)) is not None:
                    differs.append(why)
            except OSError as exc:
                differs.append(f"cannot read it: {exc.strerror}")
        if differs:
            files.remove(directory, item.slot)
            refused(spec, "restore", "differs: " + ", ".join(differs), slot=item.slot)
            continue
        t0 = time.perf_counter()
        try:
            status, body = await http.post(client, spec, into, "restore", item.data.name)
        except BaseException:
            # Cut off: the server died or hung loading it, or the budget ran out. Left,
            # the file would do the same to every next process.
            files.remove(directory, item.slot)
            raise
        tokens = body.get("n_restored")
        if status == 200 and into != item.slot:
            status, body = await http.send(client, spec, "/completion", kept.NUDGE)
        if status != 200:
            files.remove(directory, item.slot)
            refused(spec, "restore", http.error(status, body), slot=item.slot)
            continue
        files.touch(item)
        ms = round((time.perf_counter() - t0) * 1000, 1)
        if into == item.slot and isinstance(tokens, int):
            done.append((tokens, ms))
        log.info(
            "cache.restored",
            instance=spec.name,
            slot=item.slot,
            into=into,
            tokens=tokens,
            bytes=item.bytes,
            ms=ms,
        )
    return done


def refused(spec: InstanceSpec, op: str, reason: str, **fields: Any) -> None:
    log.warning("cache.refused", instance=spec.name, op=op, reason=reason, **fields)
