"""The `auto` memory budget: what our own models hold is counted once, not twice."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import psutil
import pytest
from helpers import free_port, health, wait_for
from library_helpers import write_projector

from llamad.backends.spec import InstanceSpec
from llamad.daemon.tinymodel import write_tiny_model
from llamad.gateway.admission.memory import (
    Footprint,
    Held,
    auto_budget,
    estimate,
    footprint,
    margin,
    read_ram,
    total_for,
    weights,
)

MiB = 1024**2


def fp(uss: int, anon: int) -> Footprint:
    """A measured footprint, in MiB."""
    return Footprint(uss * MiB, anon * MiB)


def ran(size: int) -> Held:
    """A running model measured at `size` (a Footprint, or plain bytes)."""
    return Held(size, measured=True, holding=True)


def guessed(mib: int, holding: bool = True) -> Held:
    """A model counted at its estimate (never measured), running or still loading."""
    return Held(mib * MiB, measured=False, holding=holding)


@pytest.mark.parametrize(
    ("free", "cgroup", "held", "linux", "total"),
    [
        (1000, None, [], True, 1000),
        # Linux: MemAvailable holds the mmapped weights already; only the anon part comes back.
        (1000, None, [ran(fp(600, 100))], True, 1100),
        (1000, None, [guessed(300), ran(fp(600, 100)), ran(fp(50, 50))], True, 1150),
        # Measured without the split (psutil's fallback): all of it, as before.
        (1000, None, [ran(600 * MiB)], True, 1600),
        # Anonymous memory shared with another process is not all ours to get back.
        (1000, None, [ran(fp(100, 300))], True, 1100),
        # macOS: a loaded model's pages (wired for Metal) are not in the available count,
        # so all of it returns: measured (phys_footprint, no anonymous split) ...
        (1000, None, [ran(600 * MiB)], False, 1600),
        # ... or, as a stock Mac before proc_pid_rusage always was, only estimated.
        (1000, None, [guessed(600)], False, 1600),
        # Still loading: it has not taken its memory yet, so nothing comes back.
        (1000, None, [guessed(600, holding=False)], False, 1000),
        # The cgroup charges page cache too: its room plus the whole footprint binds.
        (1000, 200, [ran(fp(600, 100))], True, 800),
        (1000, 900, [ran(fp(600, 100))], True, 1100),
        # A process gone (waiting to start again) is charged nothing, whatever it measured.
        (1000, 200, [Held(fp(600, 100), measured=True, holding=False)], True, 200),
    ],
)
def test_total_counts_each_model_once(
    free: int, cgroup: int | None, held: list[Held], linux: bool, total: int
) -> None:
    room = None if cgroup is None else cgroup * MiB
    assert total_for(free * MiB, room, held, linux) == total * MiB


def test_a_footprint_is_still_its_size() -> None:
    size = Footprint(600, anon=100)
    assert size == 600
    assert size + 1 == 601
    assert auto_budget([], None, read_ram()) > 0


@pytest.mark.skipif(sys.platform != "linux", reason="smaps_rollup is Linux's")
def test_a_real_llama_server_holds_file_pages_that_the_budget_does_not_add_back(
    llama_server: Path, tiny_model: Path
) -> None:
    port = free_port()
    argv = [str(llama_server), "-m", str(tiny_model), "--port", str(port), "-c", "256"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: health(port) == 200, 30, "llama-server ready")
        size = footprint(proc.pid)
        uss = psutil.Process(proc.pid).memory_full_info().uss
    finally:
        proc.kill()
        proc.wait(10)
    assert isinstance(size, Footprint)
    assert size.anon is not None
    # The same USS as psutil's (read a moment apart), of which a part is file-backed:
    # the binary's and the model's mapped pages, page cache that MemAvailable counts.
    assert abs(size - uss) < max(uss // 20, 2 * MiB)
    assert 0 < size.anon < size
    free, room = 8 * 1024 * MiB, None
    assert total_for(free, room, [ran(size)], True) == free + size.anon
    assert total_for(free, room, [ran(size)], False) == free + size
    assert margin(free) == min(free // 10, 2 * 1024 * MiB)


def test_an_estimate_counts_every_part_of_a_split_model_and_its_projector(
    tmp_path: Path,
) -> None:
    first = write_tiny_model(tmp_path / "big-Q8_0.gguf", split=8)
    parts = sorted(tmp_path.glob("big-Q8_0-*-of-*.gguf"))
    assert parts[0] == first
    assert len(parts) == 3
    assert weights(first) == sum(p.stat().st_size for p in parts)
    assert weights(parts[1]) == parts[1].stat().st_size  # a later part is only itself
    proj = write_projector(tmp_path / "mmproj-f16.gguf")

    def spec(**env: str) -> InstanceSpec:
        settings = tuple(env.items())
        return InstanceSpec(
            name="m", host="127.0.0.1", port=9, model=first, settings=settings, args=(), env=()
        )

    plain = estimate(spec(LLAMA_ARG_CTX_SIZE="256"))
    seeing = estimate(spec(LLAMA_ARG_CTX_SIZE="256", LLAMA_ARG_MMPROJ=str(proj)))
    assert plain is not None
    assert plain > weights(first)  # the weights and the KV cache
    assert seeing == plain + proj.stat().st_size
