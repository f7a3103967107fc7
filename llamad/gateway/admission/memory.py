"""How much memory a model needs, how much one uses, and how much there is.

Before a model has run, its need is estimated as Ollama does: the GGUF file plus its KV
cache, read from the header (`backends/kv_cache.py`: as llama-server sizes it, sliding
windows included), unless the config states it (`memory_estimate`). Once it has run,
its measured footprint (USS on Linux, `phys_footprint` on macOS) replaces the guess in
RAM, and the `auto` budget adds back what the free memory leaves out of it (`returned`).

The `auto` budget here is RAM's; the GPUs' budgets and shares are in `gateway/admission/devices/`.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import psutil

from llamad.backends.devices.metal import apple_silicon, working_set
from llamad.backends.gguf_meta import read_gguf_meta
from llamad.backends.kv_cache import Layout, kv_bytes, kv_shape
from llamad.backends.llama_cache import swa_full
from llamad.backends.registry import backend_for
from llamad.backends.spec import InstanceSpec
from llamad.gateway.admission.phys_footprint import PhysFootprint
from llamad.library.names import split_part

# "auto": what is free now plus what our models hold, minus this much for everything else.
MARGIN_FRACTION = 0.10
MARGIN_MAX = 2 * 1024**3

MAC = PhysFootprint()  # the system's proc_pid_rusage, loaded on the first reading


def estimate(spec: InstanceSpec) -> int | None:
    """Bytes `spec` should need once loaded; None when its model is not a local file."""
    if spec.memory_estimate is not None:
        return spec.memory_estimate
    if spec.model is None:
        return None
    known = backend_for(spec.kind).memory_estimate(spec)
    if known is not None:
        return known
    settings = dict(spec.settings)
    mmproj = settings.get("LLAMA_ARG_MMPROJ")
    try:
        return _estimate(
            spec.model, spec.model.stat().st_mtime_ns, Layout.of(settings), swa_full(spec)
        ) + (_size(Path(mmproj)) if mmproj else 0)
    except (OSError, ValueError):
        return None


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


def weights(path: Path) -> int:
    """The bytes of a model's weights: every part of a split GGUF (llama-server is given
    the first, `-00001-of-0000N`, and loads the rest beside it), else the one file."""
    stem = path.name[: -len(".gguf")] if path.name.lower().endswith(".gguf") else path.name
    split = split_part(stem)
    if split is None or split[1] != 1:
        return path.stat().st_size
    base, _, count = split
    rest = (
        path.with_name(f"{base}-{i:05d}-of-{count:05d}{path.suffix}") for i in range(2, count + 1)
    )
    return path.stat().st_size + sum(_size(p) for p in rest)


@functools.lru_cache(maxsize=256)
def _estimate(path: Path, mtime: int, layout: Layout, full_window: bool) -> int:
    size = weights(path)
    try:
        shape = kv_shape(read_gguf_meta(path))
    except (OSError, ValueError):  # unreadable or not a GGUF file: its size alone
        return size
    return size if shape is None else size + kv_bytes(shape, layout, full_window)


class Footprint(int):
    """A child's footprint (USS, bytes): the size the gateway keeps for the model, which
    also knows how much of it is anonymous memory (`anon`; None when not measured)."""

    anon: int | None

    def __new__(cls, uss: int, anon: int | None = None) -> Footprint:
        self = super().__new__(cls, uss)
        self.anon = anon
        return self


def footprint(
    pid: int | None, system: str = sys.platform, mac: PhysFootprint = MAC
) -> Footprint | None:
    """What process `pid` holds that nothing else does, or None when it is gone or cannot
    be measured: USS on Linux, `phys_footprint` (Activity Monitor's figure, read by
    `mac`) on macOS (`system` is `sys.platform`'s value)."""
    if pid is None:
        return None
    if system == "linux":
        measured = _smaps_rollup(pid)
        if measured is not None:
            return measured
    elif system == "darwin":
        # psutil's USS needs task_for_pid(), which macOS refuses an unsigned process.
        size = mac.read(pid)
        return None if size is None else Footprint(size)
    try:
        return Footprint(int(psutil.Process(pid).memory_full_info().uss))
    except (psutil.Error, AttributeError):
        return None


def _smaps_rollup(pid: int) -> Footprint | None:
    # One read of the kernel's sums (Linux 4.14+), not psutil's parse of every mapping:
    # USS as psutil counts it (the Private_* lines), and the anonymous part of it.
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return None
    kb = {}
    for line in text.splitlines()[1:]:
        key, _, value = line.partition(":")
        if value.strip().endswith("kB"):
            kb[key] = int(value.split()[0]) * 1024
    uss = sum(v for k, v in kb.items() if k.startswith("Private"))
    return Footprint(uss, kb.get("Anonymous"))


@dataclass(frozen=True)
class Held:
    """A live model as the RAM budget sees it: the bytes the ledger counts for it, whether
    they were measured, and whether its process holds its memory now (running or
    stopping; not while it loads, nor while it waits to start again)."""

    count: int
    measured: bool
    holding: bool


def returned(held: Held, linux: bool) -> int:
    """The part of a model's count that the free memory leaves out, which the budget
    adds back, so that no model is counted twice (once as missing from the free memory,
    once in the ledger).

    On macOS a loaded model's pages (wired for Metal: the mmapped weights, the KV cache)
    are missing from the available memory, so all of its count comes back, measured or
    estimated. Linux's MemAvailable counts the mmapped weights as page cache, so only
    the anonymous part of a measurement comes back; an estimate, nothing: until the
    first measurement (one tick after it runs) its KV cache is counted twice, on the
    safe side. A model still loading has not taken its memory yet: nothing comes back."""
    if not held.holding:
        return 0
    if not linux:
        return int(held.count)
    return _anon(held.count) if held.measured else 0


@dataclass(frozen=True)
class RamReading:
    """The machine's memory as the `auto` budget reads it."""

    available: int  # psutil's: MemAvailable on Linux, free + inactive on macOS
    total: int
    cgroup_room: int | None  # the cgroup's limit less its use, when it has a limit
    linux: bool
    apple_silicon: bool


def read_ram() -> RamReading:
    """This machine's reading, now."""
    vm = psutil.virtual_memory()
    linux = sys.platform == "linux"
    return RamReading(int(vm.available), int(vm.total), _cgroup_room(), linux, apple_silicon())


def auto_budget(held: Iterable[Held], listed_working_set: int | None, ram: RamReading) -> int:
    """`memory_budget = "auto"`, given the live models (`held`): what there would be
    without them, within Metal's working set on a Mac, minus a margin for everything
    else."""
    cap = working_set(ram.total, listed_working_set, ram.apple_silicon)
    total = total_for(ram.available, ram.cgroup_room, held, ram.linux, cap)
    return total - margin(total)


def total_for(
    free: int,
    cgroup_room: int | None,
    held: Iterable[Held],
    linux: bool,
    cap: int | None = None,
) -> int:
    """The memory there would be with none of our models loaded, from the `free` memory
    now, the cgroup's room (when it has a limit), what each live model gives back
    (`returned`) and Metal's working set (`cap`)."""
    models = list(held)
    total = free + sum(returned(h, linux) for h in models)
    if cgroup_room is not None:
        # memory.current charges the cgroup for page cache too, the weights included.
        charged = sum(int(h.count) for h in models if h.measured and h.holding)
        total = min(total, cgroup_room + charged)
    return total if cap is None else min(total, cap)


def _anon(size: int) -> int:
    if isinstance(size, Footprint) and size.anon is not None:
        return min(size.anon, int(size))
    return int(size)  # measured without the split (psutil), or estimated: all of it


def _cgroup_room() -> int | None:
    base = Path("/sys/fs/cgroup")
    try:
        limit = (base / "memory.max").read_text().strip()
        used = int((base / "memory.current").read_text().strip())
    except (OSError, ValueError):
        return None
    if limit == "max":
        return None
    return max(0, int(limit) - used)


def margin(total: int) -> int:
    """What `memory_budget = "auto"` leaves for everything else."""
    return min(int(total * MARGIN_FRACTION), MARGIN_MAX)
