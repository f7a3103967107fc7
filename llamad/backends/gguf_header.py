"""A fast scan of a GGUF file's header: scalar key/values, tensor shapes, and array positions.

`gguf.GGUFReader` builds two numpy views per string of every array: for a 152k-token
vocabulary plus its merges that is over half a million objects, tens of seconds on a busy
machine, while /api/tags must answer within Raycast's 10 s. This scan keeps the scalars,
steps over arrays, and notes where each array starts so one entry can be fetched later.
The format's numbers are in gguf_types.
"""

from __future__ import annotations

import mmap
import os
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llamad.backends.gguf_types import BLOCKS, DEFAULT_ALIGNMENT, MAGIC
from llamad.backends.gguf_types import ValueType as _T
from llamad.common.storefile import open_regular

# struct codes of the fixed-size value types.
_FIXED = {
    _T.UINT8: "B", _T.INT8: "b", _T.UINT16: "H", _T.INT16: "h", _T.UINT32: "I",
    _T.INT32: "i", _T.FLOAT32: "f", _T.BOOL: "?", _T.UINT64: "Q", _T.INT64: "q",
    _T.FLOAT64: "d",
}  # fmt: skip


@dataclass(frozen=True)
class ArrayRef:
    """Where an array value sits: its item type, length, first item's offset and end."""

    item_type: int
    count: int
    offset: int
    end: int = 0


# Numeric arrays up to this length are read whole: per-layer values such as head_count_kv
# on models whose layers differ.
SMALL_ARRAY = 1024


@dataclass(frozen=True)
class Header:
    """A GGUF header: scalar values (and small numeric arrays as lists), arrays by
    reference, and each tensor's element count."""

    scalars: dict[str, Any]
    arrays: dict[str, ArrayRef]
    tensor_elements: list[int]
    # The size a complete file has: where its last tensor's data ends. A shorter file was
    # cut (a copy still running, a failed download) and llama-server cannot load it.
    data_end: int = 0


class _Cursor:
    def __init__(self, buf: mmap.mmap, order: str) -> None:
        self.buf, self.order, self.pos = buf, order, 0

    def fixed(self, code: str) -> Any:
        (value,) = struct.unpack_from(self.order + code, self.buf, self.pos)
        self.pos += struct.calcsize(code)
        return value

    def string(self) -> str:
        n = self.fixed("Q")
        raw = self.buf[self.pos : self.pos + n]
        self.pos += n
        return raw.decode("utf-8", "replace")

    def skip_strings(self, count: int) -> None:
        code = self.order + "Q"
        for _ in range(count):
            (n,) = struct.unpack_from(code, self.buf, self.pos)
            self.pos += 8 + n

    def value(self, vtype: int) -> Any:
        if vtype == _T.STRING:
            return self.string()
        return self.fixed(_FIXED[_T(vtype)])


@contextmanager
def _mapped(path: Path) -> Iterator[mmap.mmap]:
    """The file mapped read-only; a FIFO or device (in a store) is refused, not opened."""
    fd = open_regular(path)
    try:
        with mmap.mmap(fd, 0, access=mmap.ACCESS_READ) as buf:
            yield buf
    finally:
        os.close(fd)


def scan(path: Path) -> Header:
    """Scan the header of the GGUF file at `path`; ValueError when it is not one."""
    with _mapped(path) as buf:
        try:
            return _scan(buf)
        except (struct.error, KeyError, IndexError) as exc:
            raise ValueError(f"truncated or corrupt GGUF header ({exc})") from exc


def _scan(buf: mmap.mmap) -> Header:
    (magic,) = struct.unpack_from("<I", buf, 0)
    if magic != MAGIC:
        raise ValueError("no GGUF magic")
    (version,) = struct.unpack_from("<I", buf, 4)
    # A big-endian file shows its version byte-swapped (llama.cpp writes versions < 65536).
    cur = _Cursor(buf, "<" if version & 0xFFFF else ">")
    cur.pos = 8
    n_tensors, n_kv = cur.fixed("Q"), cur.fixed("Q")
    scalars: dict[str, Any] = {}
    arrays: dict[str, ArrayRef] = {}
    for _ in range(n_kv):
        key = cur.string()
        vtype = cur.fixed("I")
        if vtype != _T.ARRAY:
            scalars[key] = cur.value(vtype)
            continue
        item, count = cur.fixed("I"), cur.fixed("Q")
        start = cur.pos
        if item == _T.STRING:
            cur.skip_strings(count)
        elif item == _T.ARRAY:
            raise ValueError(f"{key}: nested arrays are not supported")
        else:
            code = _FIXED[_T(item)]
            if count <= SMALL_ARRAY:
                scalars[key] = list(struct.unpack_from(f"{cur.order}{count}{code}", buf, cur.pos))
            cur.pos += count * struct.calcsize(code)
        arrays[key] = ArrayRef(item, count, start, cur.pos)
    elements, end = [], 0
    for _ in range(n_tensors):
        cur.string()
        dims = [cur.fixed("Q") for _ in range(cur.fixed("I"))]
        ggml_type = cur.fixed("I")
        offset = cur.fixed("Q")
        count = 1
        for d in dims:
            count *= d
        elements.append(count)
        end = max(end, offset + _tensor_bytes(ggml_type, count))
    align = scalars.get("general.alignment", DEFAULT_ALIGNMENT)
    if not isinstance(align, int) or align <= 0:
        raise ValueError(f"general.alignment: {align!r} is not a positive number")
    data_start = -(-cur.pos // align) * align
    return Header(scalars, arrays, elements, data_start + end)


def _tensor_bytes(ggml_type: int, count: int) -> int:
    if ggml_type not in BLOCKS:
        raise ValueError(f"unknown tensor type {ggml_type} (a newer llama.cpp's?)")
    block, size = BLOCKS[ggml_type]
    return count // block * size


def array_string(path: Path, ref: ArrayRef, index: int) -> str | None:
    """Item `index` of a string array (e.g. one token's text), or None when out of range."""
    if ref.item_type != _T.STRING or not 0 <= index < ref.count:
        return None
    with _mapped(path) as buf:
        (version,) = struct.unpack_from("<I", buf, 4)
        cur = _Cursor(buf, "<" if version & 0xFFFF else ">")
        cur.pos = ref.offset
        cur.skip_strings(index)
        return cur.string()


def strings_present(path: Path, ref: ArrayRef, texts: tuple[str, ...]) -> frozenset[str]:
    """Which of `texts` are items of a string array (e.g. tokens of a 128k vocabulary).

    Each item is searched as it is stored, its 8-byte length then its bytes, in the
    array's span: one pass in C instead of decoding every item. A match off an item's
    start would need those length bytes (seven NULs) inside another token.
    """
    if ref.item_type != _T.STRING or ref.end <= ref.offset:
        return frozenset()
    with _mapped(path) as buf:
        try:
            (version,) = struct.unpack_from("<I", buf, 4)
        except struct.error as exc:  # the file was cut since its header was read
            raise ValueError(f"truncated GGUF header ({exc})") from exc
        order = "<" if version & 0xFFFF else ">"
        needles = {t: struct.pack(order + "Q", len(t.encode())) + t.encode() for t in texts}
        return frozenset(t for t, n in needles.items() if buf.find(n, ref.offset, ref.end) >= 0)
