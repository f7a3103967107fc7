"""The prompt cache's files while a save is under way, on the real llama-server and the
tiny model: `llamactl cache` (list, clear) or another instance's pruning landing while
llama-server writes a slot leaves no half pair, and a slot file that came out short is
never recorded."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from helpers import free_port
from inprocess import complete, config, events, supervising
from structlog.testing import capture_logs

from llamad.backends.local_http import Client, Reply
from llamad.config.load import load
from llamad.lifecycle.states import State
from llamad.supervise import slot_files as files
from llamad.supervise.slot_cache import SlotCache
from llamad.supervise.steps import stop

PROMPT = "abc def ghi jkl mno pqr stu vwx yz " * 4


class Meddling(Client):
    """A client that runs `meddle` once llama-server has answered a save: what another
    task does to the cache while the save is under way."""

    def __init__(self, meddle: Callable[[], object]) -> None:
        super().__init__()
        self.meddle = meddle

    async def request(self, *args: Any, **kwargs: Any) -> Reply:
        reply = await super().request(*args, **kwargs)
        if "action=save" in args[1]:
            self.meddle()
        return reply


def _pairs(directory: Path) -> tuple[set[str], set[str]]:
    """The stems of the slot files and of the sidecars in `directory`."""
    return {p.stem for p in directory.glob("*.bin")}, {p.stem for p in directory.glob("*.json")}


Seen = tuple[list[int], tuple[set[str], set[str]], list[dict[str, Any]]]


async def _save_meddled(tmp_path: Path, tiny_model: Path, meddle: Callable[[Path], object]) -> Seen:
    """A turn on the real server, then a save during which `meddle(root)` runs: right
    after it, the slots saved, the stems of the files and sidecars, and the events."""
    port = free_port()
    table = {"m": {"model": tiny_model, "port": port, "ctx_size": 512, "n_parallel": 1}}
    with capture_logs() as logs:
        async with supervising(config(tmp_path, table)) as sup:
            inst = await sup.state("m", State.RUNNING)
            directory = inst.spec.prompt_cache
            assert directory is not None
            root = directory.parent
            client = Meddling(lambda: meddle(root))
            await complete(port, PROMPT)
            await SlotCache(client, None).save(inst.spec)
            client.close()
            return [s.slot for s in files.saved(directory)], _pairs(directory), list(logs)


async def test_a_listing_during_a_save_leaves_it_whole(tmp_path: Path, tiny_model: Path) -> None:
    """`llamactl cache list` (or a prune) while llama-server writes: the save is kept."""
    slots, (bins, sides), _ = await _save_meddled(tmp_path, tiny_model, files.everything)
    assert slots == [0]
    assert bins == sides == {"slot-0"}


async def test_a_clear_during_a_save_leaves_no_half_pair(tmp_path: Path, tiny_model: Path) -> None:
    _, (bins, sides), _ = await _save_meddled(tmp_path, tiny_model, files.clear)
    assert bins == sides


async def test_a_short_file_is_not_recorded(tmp_path: Path, tiny_model: Path) -> None:
    """A write cut short (a full disk): no sidecar, no file, and an event says why."""

    def cut(root: Path) -> None:
        for path in root.glob("m/slot-0*"):
            if path.suffix != ".json":
                path.write_bytes(path.read_bytes()[:100])

    slots, pairs, logs = await _save_meddled(tmp_path, tiny_model, cut)
    assert (slots, pairs) == ([], (set(), set()))
    assert events(logs, "cache.refused", instance="m", op="save")
    assert not events(logs, "cache.saved", instance="m")


def _in(cfg: Path, **daemon: str) -> Path:
    """`cfg` with `daemon`'s keys added to its [daemon] table."""
    keys = "".join(f'{k} = "{v}"\n' for k, v in daemon.items())
    cfg.write_text(cfg.read_text().replace("[daemon]\n", f"[daemon]\n{keys}", 1))
    return cfg


async def test_a_moved_cache_dir_is_kept_to_cache_max(tmp_path: Path, tiny_model: Path) -> None:
    """A reload that moves `cache_dir` restarts the instances into the new directory:
    that is the one held to `cache_max`, not the one the daemon started with."""
    port = free_port()
    table = {"m": {"model": tiny_model, "port": port, "ctx_size": 512, "n_parallel": 1}}
    first = _in(config(tmp_path, table), cache_dir=str(tmp_path / "one"), cache_max="1KiB")
    with capture_logs() as logs:
        async with supervising(first) as sup:
            await sup.state("m", State.RUNNING)
            second = _in(config(tmp_path, table), cache_dir=str(tmp_path / "two"), cache_max="1KiB")
            await sup.supervisor.apply(load(second).instances)
            await sup.drained()
            inst = await sup.state("m", State.RUNNING)
            assert inst.spec.prompt_cache == tmp_path / "two" / "m"
            await complete(port, PROMPT)
            await stop(inst)
            held = [s.slot for s in files.everything(tmp_path / "two")]
    assert events(logs, "cache.saved", instance="m")
    assert held == []  # pruned: a slot of the tiny model is more than 1 KiB
    assert events(logs, "cache.pruned", instance="m")
