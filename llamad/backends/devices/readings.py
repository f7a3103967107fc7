"""Pure readings of what the tools print: llama-server's `--list-devices`, nvidia-smi's
CSV, and macOS's sysctl. Each takes the text and returns values; nothing runs here."""

from __future__ import annotations

import re
from dataclasses import dataclass

MiB = 1024**2
# `  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23500 MiB free)` (llama.cpp common/arg.cpp)
_DEVICE = re.compile(r"^\s*(\S+):\s*(.*?)\s*\((\d+)\s*MiB,\s*(\d+)\s*MiB free\)\s*$")


@dataclass(frozen=True)
class Device:
    """One device llama-server can offload to: `CUDA0`, `ROCm0`, `Vulkan0`, `Metal`.
    On a Mac the Metal device's size is the working set Metal may wire, not the RAM."""

    name: str
    description: str
    total: int  # bytes
    free: int  # bytes, when last read

    @property
    def unified(self) -> bool:
        """Metal shares the RAM: what it holds is RAM too."""
        return self.name.startswith("Metal") or self.name.startswith("MTL")


def list_devices(text: str) -> list[Device]:
    """The devices in `llama-server --list-devices` output (empty on a CPU-only build)."""
    out = []
    for line in text.splitlines():
        if m := _DEVICE.match(line):
            name, description, total, free = m.groups()
            out.append(Device(name, description, int(total) * MiB, int(free) * MiB))
    return out


@dataclass(frozen=True)
class Gpu:
    """A row of `nvidia-smi --query-gpu=index,name,memory.total,memory.free`."""

    index: int
    name: str
    total: int  # bytes
    free: int  # bytes


def nvidia_gpus(text: str) -> list[Gpu]:
    """The rows of nvidia-smi's `--format=csv,noheader,nounits` GPU query (MiB)."""
    out = []
    for row in _csv(text, 4):
        try:
            out.append(Gpu(int(row[0]), row[1], int(row[2]) * MiB, int(row[3]) * MiB))
        except ValueError:  # "[N/A]" or a line from a driver that says something else
            continue
    return out


def nvidia_apps(text: str) -> dict[int, int]:
    """Bytes each process holds, from `--query-compute-apps=pid,used_memory` (summed over
    GPUs: a process split across two cards has a row on each)."""
    out: dict[int, int] = {}
    for row in _csv(text, 2):
        try:
            pid, used = int(row[0]), int(row[1]) * MiB
        except ValueError:
            continue
        out[pid] = out.get(pid, 0) + used
    return out


def _csv(text: str, width: int) -> list[list[str]]:
    rows = [[c.strip() for c in line.split(",")] for line in text.splitlines() if line.strip()]
    return [r for r in rows if len(r) == width]


def sysctl_int(text: str) -> int | None:
    """The number `sysctl -n NAME` prints, or None (unset, or not a number)."""
    try:
        return int(text.strip())
    except ValueError:
        return None


def with_vendor(devices: list[Device], gpus: list[Gpu], family: str = "CUDA") -> list[Device]:
    """`devices` with each of `family`'s devices (`CUDA`, `ROCm`) given the total and free
    of the vendor tool's row of the same index, read now rather than when llama-server
    last listed them."""
    by_index = {g.index: g for g in gpus}
    out = []
    for d in devices:
        g = by_index.get(_index(d.name, family)) if d.name.startswith(family) else None
        out.append(d if g is None else Device(d.name, d.description, g.total, g.free))
    return out


def with_wired_limit(devices: list[Device], limit_mb: int | None) -> list[Device]:
    """`devices` with Metal's size raised (or lowered) to `iogpu.wired_limit_mb` when set."""
    if not limit_mb:
        return devices
    size = limit_mb * MiB
    return [
        Device(d.name, d.description, size, max(0, d.free + size - d.total)) if d.unified else d
        for d in devices
    ]


def _index(name: str, family: str) -> int:
    digits = name.removeprefix(family)
    return int(digits) if digits.isdigit() else -1
