"""Never a wrong cache, on the real llama-server and the tiny model: a reload that
changes what the KV cache holds (RoPE, an adapter, any flag llamad does not know to be
neutral) refuses the saved slot, one that changes only how the server runs (threads)
restores it; a file damaged on disk is never loaded, and one that kills or hangs the
server while it loads is removed."""

from __future__ import annotations

import json
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from helpers import free_port
from inprocess import complete, config, events, supervising
from structlog.testing import capture_logs
from test_slot_cache import reseal

from llamad.backends.local_http import Client
from llamad.config.load import load
from llamad.lifecycle.states import State
from llamad.supervise.slot_cache import SlotCache
from llamad.supervise.steps import start, stop

PROMPT = "abc def ghi jkl mno pqr stu vwx yz " * 4


async def _after_reload(tmp_path: Path, tiny_model: Path, **change: Any) -> list[dict[str, Any]]:
    """A turn, a reload that makes the instance's launch `change`d; the cache's events."""
    port = free_port()
    table = {"model": tiny_model, "port": port, "ctx_size": 512, "n_parallel": 1}
    with capture_logs() as logs:
        async with supervising(config(tmp_path, {"m": table})) as sup:
            pid = (await sup.state("m", State.RUNNING)).record.pid
            await complete(port, PROMPT)
            changed = load(config(tmp_path, {"m": {**table, **change}}))
            await sup.supervisor.apply(changed.instances)
            await sup.drained()
            assert (await sup.state("m", State.RUNNING)).record.pid != pid
    return [e for e in logs if e["event"].startswith("cache.")]


async def test_a_rope_change_refuses_the_file(tmp_path: Path, tiny_model: Path) -> None:
    """The keys are cached with the RoPE they were computed under: another base makes
    the saved slot wrong for the new process."""
    logs = await _after_reload(tmp_path, tiny_model, rope_freq_base=20000)
    assert events(logs, "cache.saved", instance="m")
    refused = events(logs, "cache.refused", instance="m", op="restore")
    assert refused
    assert "launch" in refused[0]["reason"]
    assert not events(logs, "cache.restored")


@pytest.mark.parametrize(
    "change",
    # The second keeps 512 tokens a slot, but llama-server cannot load the file then.
    [{"args": ["--rope-scale", "2"]}, {"ctx_size": 1024, "n_parallel": 2}],
    ids=["args", "slots"],
)
async def test_a_flag_or_the_slot_count_refuses_the_file(
    tmp_path: Path, tiny_model: Path, change: dict[str, Any]
) -> None:
    logs = await _after_reload(tmp_path, tiny_model, **change)
    assert "launch" in events(logs, "cache.refused", op="restore")[0]["reason"]
    assert not events(logs, "cache.restored")


async def test_a_thread_count_change_keeps_the_file(tmp_path: Path, tiny_model: Path) -> None:
    logs = await _after_reload(tmp_path, tiny_model, threads=1)
    assert events(logs, "cache.restored", instance="m", slot=0)
    assert not events(logs, "cache.refused")


async def test_a_slot_file_cut_short_on_disk_is_never_loaded(
    tmp_path: Path, tiny_model: Path
) -> None:
    """Its tokens whole, its state cut: refused before llama-server sees it, removed."""
    port = free_port()
    table = {"m": {"model": tiny_model, "port": port, "ctx_size": 512, "n_parallel": 1}}
    with capture_logs() as logs:
        async with supervising(config(tmp_path, table)) as sup:
            inst = await sup.state("m", State.RUNNING)
            await complete(port, PROMPT)
            await stop(inst)
            assert inst.spec.prompt_cache is not None
            data = inst.spec.prompt_cache / "slot-0.bin"
            data.write_bytes(data.read_bytes()[: data.stat().st_size * 2 // 3])
            await start(inst)
            await sup.state("m", State.RUNNING)
            assert not data.exists()
    assert not events(logs, "cache.restored")
    assert events(logs, "cache.refused", instance="m", op="restore", slot=0)


def _scrambled(data: bytes) -> bytes:
    """A slot file of the same size whose KV cells after the token ids are garbage
    (a disk's damage): the real llama-server spins on it for about a minute."""
    count = struct.unpack("<I", data[8:12])[0]
    at = 12 + 4 * count + 4
    return data[:at] + b"\xff" * 64 + data[at + 64 :]


async def _poisoned(
    tmp_path: Path, tiny_model: Path, damage: Callable[[Path], None]
) -> tuple[bool, list[dict[str, Any]]]:
    """A saved slot, damaged by `damage(directory)` and restored into a running server
    with a 2 s budget: whether its file is still there, and the cache's events."""
    port = free_port()
    table = {"m": {"model": tiny_model, "port": port, "ctx_size": 512, "n_parallel": 1}}
    with capture_logs() as logs:
        async with supervising(config(tmp_path, table, stop_timeout=2.0)) as sup:
            inst = await sup.state("m", State.RUNNING)
            directory = inst.spec.prompt_cache
            assert directory is not None
            await complete(port, PROMPT)
            await stop(inst)
            aside = tmp_path / "aside"
            directory.rename(aside)  # the supervisor's own restore finds nothing
            await start(inst)
            await sup.state("m", State.RUNNING)
            directory.rmdir()
            aside.rename(directory)
            damage(directory)
            cache = SlotCache(Client(), None, restore_budget=2.0)
            await cache.restore(inst.spec)
            cache.client.close()
            kept = (directory / "slot-0.bin").exists()
    return kept, [e for e in logs if e["event"].startswith("cache.")]


async def test_a_file_that_hangs_the_server_is_removed(tmp_path: Path, tiny_model: Path) -> None:
    """The restore runs out of its budget: the file goes, or every next process would
    spin on it again."""

    def scramble(directory: Path) -> None:
        data = directory / "slot-0.bin"
        data.write_bytes(_scrambled(data.read_bytes()))
        reseal(directory)  # as if llamad had saved it so: only llama-server can tell

    kept, logs = await _poisoned(tmp_path, tiny_model, scramble)
    assert not kept
    assert events(logs, "cache.refused", op="restore", reason="not done within 2s")


async def test_a_file_that_kills_the_server_is_removed(tmp_path: Path, tiny_model: Path) -> None:
    """Cut short, with a sidecar that says so (tampered): llama-server dies loading it,
    and the file goes with it."""

    def cut(directory: Path) -> None:
        data, side = directory / "slot-0.bin", directory / "slot-0.json"
        data.write_bytes(data.read_bytes()[: data.stat().st_size * 2 // 3])
        body = json.loads(side.read_text())
        side.write_text(json.dumps({**body, "bytes": data.stat().st_size}))
        reseal(directory)

    kept, logs = await _poisoned(tmp_path, tiny_model, cut)
    assert not kept
    assert events(logs, "cache.refused", op="restore")
