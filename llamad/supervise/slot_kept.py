"""More conversations than slots, across processes: a slot's file is set aside before the
slot is saved again, so the conversation it held is kept (as `slot-K.bin`, K from KEPT
up), and a kept file is removed once a newer save shows it to be the same conversation
grown: its tokens a prefix of the newer file's. llama-server's slot file starts with the
tokens it holds (llama.cpp's `llama_state_seq_save_file`: magic, version, count, ids).

A new process gets the kept conversations back through llama-server's own tier below
the slots, its prompt cache in host memory (`--cache-ram`): each is restored into slot 0
and let go by a one-token request pinned there, which moves it to that cache; the slots'
own files are restored after them.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import struct
from pathlib import Path

from llamad.backends.spec import InstanceSpec
from llamad.supervise import slot_files as files

MAGIC = b"qsgg"  # LLAMA_STATE_SEQ_MAGIC ('ggsq') as a little-endian file starts
HEAD = struct.Struct("<4sII")  # magic, version, token count
# What lets a restored conversation go from slot 0 into the prompt cache: any other prompt.
NUDGE = {"prompt": "\n", "n_predict": 1, "id_slot": 0, "cache_prompt": True}


def tokens(path: Path) -> bytes | None:
    """The token ids a slot file holds (4 bytes each), or None when it is not one."""
    try:
        with path.open("rb") as f:
            head = f.read(HEAD.size)
            if len(head) < HEAD.size:
                return None
            magic, _, count = HEAD.unpack(head)
            body = f.read(4 * count) if magic == MAGIC else b""
    except OSError:
        return None
    return body if magic == MAGIC and len(body) == 4 * count else None


def digest(ids: bytes) -> str:
    return hashlib.blake2b(ids, digest_size=16).hexdigest()


def set_aside(directory: Path, slot: int) -> None:
    """Before slot `slot` is saved again: its file, if any, becomes a kept conversation."""
    if not files.has(directory, slot):
        return
    taken = {s.slot for s in files.saved(directory)}
    number = next(n for n in itertools.count(files.KEPT) if n not in taken)
    os.replace(directory / files.data_name(slot), directory / files.data_name(number))
    os.replace(files.sidecar(directory, slot), files.sidecar(directory, number))


def superseded(directory: Path, ids: bytes) -> list[files.Saved]:
    """Remove the kept conversations that a file holding `ids` grew from; returns them."""
    gone = []
    for item in files.saved(directory):
        end = 4 * item.tokens
        if item.kept and item.digest and end <= len(ids) and digest(ids[:end]) == item.digest:
            files.remove(directory, item.slot)
            gone.append(item)
    return gone


def through_memory(spec: InstanceSpec) -> bool:
    """`spec`'s server keeps a prompt cache in host memory (`cache_ram` is not 0)."""
    return dict(spec.settings).get("LLAMA_ARG_CACHE_RAM", "").strip() != "0"
