"""What a saved slot fits, across a reload that restarts the instance, on the real
llama-server and the tiny model: a launch that changes what the KV cache holds (RoPE,
an adapter, any flag llamad does not know to be neutral) refuses the file; one that
changes only how the server runs (threads) restores it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import free_port
from inprocess import complete, config, events, supervising
from structlog.testing import capture_logs

from llamad.config.load import load
from llamad.lifecycle.states import State

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


async def test_a_flag_in_args_refuses_the_file(tmp_path: Path, tiny_model: Path) -> None:
    logs = await _after_reload(tmp_path, tiny_model, args=["--rope-scale", "2"])
    assert "launch" in events(logs, "cache.refused", op="restore")[0]["reason"]
    assert not events(logs, "cache.restored")


async def test_a_thread_count_change_keeps_the_file(tmp_path: Path, tiny_model: Path) -> None:
    logs = await _after_reload(tmp_path, tiny_model, threads=1)
    assert events(logs, "cache.restored", instance="m", slot=0)
    assert not events(logs, "cache.refused")
