"""Pure readings of AMD's tools, for the free memory of each ROCm device now:
`amd-smi metric --mem-usage --json` (ROCm 6 and later) and the older
`rocm-smi --showmeminfo vram --json`. Each takes the text and returns rows; a text either
tool would not print gives none."""

from __future__ import annotations

import json
from typing import Any

from llamad.backends.devices.readings import Gpu

# amd-smi's units are binary multiples (its MB is the driver's bytes / 2**20).
_UNITS = {"B": 1, "KB": 1024, "MB": 1024**2, "GB": 1024**3, "KIB": 1024, "MIB": 1024**2}
_UNITS["GIB"] = 1024**3


def amd_smi_gpus(text: str) -> list[Gpu]:
    """The GPUs in `amd-smi metric --mem-usage --json`: a list of `{"gpu": N,
    "mem_usage": {"total_vram": {"value": V, "unit": "MB"}, "free_vram": ...}}`, which
    newer releases wrap in `{"gpu_data": [...]}`."""
    data = _json(text)
    if isinstance(data, dict):
        data = data.get("gpu_data")
    out = []
    for entry in data if isinstance(data, list) else []:
        mem = entry.get("mem_usage") if isinstance(entry, dict) else None
        if not isinstance(mem, dict):
            continue
        index, total = _int(entry.get("gpu")), _size(mem.get("total_vram"))
        free = _size(mem.get("free_vram"))
        if free is None and total is not None and (used := _size(mem.get("used_vram"))):
            free = total - used
        if index is not None and total is not None and free is not None:
            out.append(Gpu(index, "", total, max(0, free)))
    return out


def rocm_smi_gpus(text: str) -> list[Gpu]:
    """The GPUs in `rocm-smi --showmeminfo vram --json`: `{"card0": {"VRAM Total Memory
    (B)": "...", "VRAM Total Used Memory (B)": "..."}, ...}` (bytes, as strings); keys
    that are not a card (`system`) are skipped."""
    data = _json(text)
    out = []
    for key, card in data.items() if isinstance(data, dict) else ():
        index = _int(key.removeprefix("card")) if key.startswith("card") else None
        if index is None or not isinstance(card, dict):
            continue
        total = _int(card.get("VRAM Total Memory (B)"))
        used = _int(card.get("VRAM Total Used Memory (B)"))
        name = str(card.get("Card Series") or card.get("Card series") or "")
        if total is not None and used is not None:
            out.append(Gpu(index, name, total, max(0, total - used)))
    return sorted(out, key=lambda g: g.index)


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:  # a warning line before the JSON, or an old tool's plain text
        start = min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)
        try:
            return json.loads(text[start:]) if start > 0 else None
        except ValueError:
            return None


def _size(field: Any) -> int | None:
    """Bytes of `{"value": V, "unit": U}`; None for "N/A" or an unknown unit."""
    if not isinstance(field, dict):
        return None
    value, unit = field.get("value"), str(field.get("unit", "")).strip().upper()
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    scale = _UNITS.get(unit)
    return None if scale is None else int(number * scale)


def _int(value: Any) -> int | None:
    try:
        return int(str(value).strip())
    except ValueError:
        return None
