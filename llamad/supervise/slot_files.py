"""The prompt cache on disk: one directory per instance, a slot's file (`slot-N.bin`, as
llama-server wrote it) beside its sidecar (`slot-N.json`: what it fits, when, how big).
Numbers from KEPT up are conversations no slot held when they were last saved
(slot_kept.py). llama-server writes a save as `slot-N.part`, which nothing lists or
prunes; it becomes `slot-N.bin` with its sidecar in one step, so whoever looks between
two awaits (a listing, a clear, a prune) sees a whole pair or none.

The sidecar holds the file's sha256 as llamad kept it: only a file whose bytes are still
those is restored (`matches`), so a file llamad did not write in that slot's name (a
client's save through llama-server, a copy, a disk's damage) is never loaded.

The sidecar's mtime is the file's last use: the least recently used go first when the
cache outgrows its bound."""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote

GIB = 1024**3
# A file numbered from here up is a kept conversation, not a slot's.
KEPT = 1000


@dataclass(frozen=True)
class Saved:
    """One saved slot."""

    instance: str
    slot: int
    data: Path
    bytes: int
    tokens: int
    used: float  # wall time of the last save or restore
    fit: dict[str, Any]
    digest: str | None = None  # of the tokens it holds (slot_kept.digest)
    written: int | None = None  # the bytes its sidecar says were saved
    sha256: str | None = None  # of the bytes llamad kept; None: not llamad's record

    @property
    def kept(self) -> bool:
        """A conversation kept beyond the slots, not a slot's own file."""
        return self.slot >= KEPT

    def to_dict(self, now: float) -> dict[str, Any]:
        """As `llamactl cache` lists it (a kept conversation has no slot)."""
        return {
            "model": self.instance,
            "slot": None if self.kept else self.slot,
            "bytes": self.bytes,
            "tokens": self.tokens,
            "age_s": round(max(0.0, now - self.used), 1),
        }


def data_name(slot: int) -> str:
    """The bare file name llama-server saves slot `slot` under."""
    return f"slot-{slot}.bin"


def part_name(slot: int) -> str:
    """The bare file name llama-server writes slot `slot`'s save under, until it is whole."""
    return f"slot-{slot}.part"


def has(directory: Path, slot: int) -> bool:
    """Slot `slot` has a file and sidecar in `directory` (not pruned or cleared since)."""
    return (directory / data_name(slot)).is_file() and sidecar(directory, slot).is_file()


def sidecar(directory: Path, slot: int) -> Path:
    return directory / f"slot-{slot}.json"


def whole(directory: Path, slot: int, size: int) -> str | None:
    """Why slot `slot`'s written save is not the `size` bytes llama-server said it wrote
    (a full disk cuts it short), or None when it is."""
    try:
        held = (directory / part_name(slot)).stat().st_size
    except OSError as exc:
        return f"cannot read it: {exc.strerror}"
    return None if held == size > 0 else f"{held} of {size} bytes written"


def content_digest(path: Path) -> str:
    """The sha256 of `path`'s bytes (read in blocks; hashlib lets go of the GIL, so a
    thread may run it beside the loop). Raises OSError."""
    with path.open("rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def matches(item: Saved) -> str | None:
    """Why `item`'s file is not the one llamad saved (no record of its bytes, or other
    bytes), or None when it is. Raises OSError when it cannot be read."""
    if item.sha256 is None:
        return "no record of the bytes llamad saved"
    if content_digest(item.data) != item.sha256:
        return "its bytes are not those llamad saved"
    return None


def keep(directory: Path, slot: int) -> None:
    """Slot `slot`'s written save becomes its file (its sidecar is written next)."""
    os.replace(directory / part_name(slot), directory / data_name(slot))


def drop_parts(directory: Path, slot: int | None = None) -> None:
    """Remove the saves never made whole: slot `slot`'s, or every one of `directory`."""
    names = [part_name(slot)] if slot is not None else _names(directory)
    for name in names:
        if name.startswith("slot-") and name.endswith(".part"):
            with contextlib.suppress(OSError):
                (directory / name).unlink()


def record(
    directory: Path,
    slot: int,
    fit: dict[str, Any],
    tokens: int,
    size: int,
    digest: str | None = None,
    sha256: str | None = None,
) -> None:
    """Write the sidecar of a slot just saved."""
    body: dict[str, Any] = {"fit": fit, "tokens": tokens, "bytes": size, "saved_at": time.time()}
    if sha256 is not None:
        body["sha256"] = sha256
    if digest is not None:
        body["digest"] = digest
    final = sidecar(directory, slot)
    tmp = final.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=1), encoding="utf-8")
    os.replace(tmp, final)


def touch(item: Saved) -> None:
    """Mark `item` used now (LRU)."""
    with contextlib.suppress(OSError):
        os.utime(sidecar(item.data.parent, item.slot))


def remove(directory: Path, slot: int) -> None:
    """Remove a slot's file and sidecar; what is already gone is fine, and what a disk
    will not let go of (read-only) stays: the fit check still refuses it."""
    for path in (directory / data_name(slot), sidecar(directory, slot)):
        with contextlib.suppress(OSError):
            path.unlink()


def saved(directory: Path) -> list[Saved]:
    """The slots saved in one instance's directory; a file without a readable sidecar
    (a save cut short) is removed."""
    out: list[Saved] = []
    for name in _names(directory):
        if not (name.startswith("slot-") and name.endswith(".bin")):
            continue
        slot_text = name[len("slot-") : -len(".bin")]
        if not slot_text.isdigit():
            continue
        slot, data = int(slot_text), directory / name
        try:
            side = sidecar(directory, slot)
            body = json.loads(side.read_text(encoding="utf-8"))
            used, size = side.stat().st_mtime, data.stat().st_size
            fit = body["fit"]
            tokens = int(body.get("tokens", 0))
            digest = body.get("digest")
            written = body.get("bytes")
            sha256 = body.get("sha256")
        except (OSError, ValueError, KeyError, TypeError):
            remove(directory, slot)
            continue
        name = unquote(directory.name)
        sha256 = sha256 if isinstance(sha256, str) else None
        out.append(Saved(name, slot, data, size, tokens, used, fit, digest, written, sha256))
    return out


def held_bytes(directory: Path) -> int:
    """The bytes of the slot files in one instance's directory, by their sizes alone (no
    sidecar read: a status read changes nothing)."""
    total = 0
    for name in _names(directory):
        if name.startswith("slot-") and name.endswith(".bin"):
            with contextlib.suppress(OSError):
                total += (directory / name).stat().st_size
    return total


def _names(directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except OSError:
        return []


def everything(root: Path) -> list[Saved]:
    """Every saved slot under the cache's root, per instance directory."""
    try:
        dirs = sorted(p for p in root.iterdir() if p.is_dir())
    except OSError:
        return []
    return [item for d in dirs for item in saved(d)]


def limit(root: Path, configured: int | None, held: int) -> int:
    """`cache_max`, else min(10 GiB, 10% of the space free plus what the cache holds)."""
    if configured is not None:
        return configured
    try:
        free = shutil.disk_usage(root).free
    except OSError:
        free = 0
    return min(10 * GIB, (free + held) // 10)


def prune(root: Path, configured: int | None) -> list[Saved]:
    """Remove the least recently used files until the cache fits its bound; returns them."""
    items = sorted(everything(root), key=lambda s: s.used)
    held = sum(s.bytes for s in items)
    bound = limit(root, configured, held)
    gone: list[Saved] = []
    for item in items:
        if held <= bound:
            break
        remove(item.data.parent, item.slot)
        held -= item.bytes
        gone.append(item)
    return gone


def clear(root: Path, instance: str | None = None) -> list[Saved]:
    """Remove every saved slot, or those of `instance`; returns what was removed."""
    gone = [s for s in everything(root) if instance is None or s.instance == instance]
    for item in gone:
        remove(item.data.parent, item.slot)
    return gone
