"""More conversations than slots across processes, on the real llama-server and the tiny
model: a slot's file is set aside when the slot is saved with another conversation, a
kept file the same conversation grew from is removed, and a new process gets the kept
ones back through llama-server's prompt cache in memory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from helpers import free_port, until
from inprocess import complete, config, events, saving, supervising
from structlog.testing import capture_logs

from llamad.lifecycle.states import State
from llamad.supervise import slot_files as files
from llamad.supervise import slot_kept as kept
from llamad.supervise.steps import start, stop

TALKS = {"A": "AAA aaa bbb " * 20, "B": "BBB ccc ddd " * 20}


async def test_two_conversations_on_one_slot_outlive_a_restart(
    tmp_path: Path, tiny_model: Path
) -> None:
    port = free_port()
    table = {"m": {"model": tiny_model, "port": port, "ctx_size": 512, "n_parallel": 1}}
    talks = dict(TALKS)
    with capture_logs() as logs:
        async with supervising(config(tmp_path, table)) as sup:
            inst = await sup.state("m", State.RUNNING)
            directory = inst.spec.prompt_cache
            assert directory is not None
            async with saving(sup, interval=0.1) as saves:
                for n, who in enumerate("ABA"):
                    answer = await complete(port, talks[who])
                    talks[who] += answer["content"] + " next"
                    saves.grew("m", 100)
                    await _wait_saves(logs, n + 1)
            # A grew in slot 0 again: B was set aside, and A's first file superseded.
            saved = files.saved(directory)
            assert sorted(s.kept for s in saved) == [False, True]
            assert events(logs, "cache.superseded", instance="m", by=0)
            await stop(inst)
            await start(inst)
            await sup.state("m", State.RUNNING)
            again = {who: await complete(port, talks[who]) for who in "BA"}
    assert [e["into"] for e in events(logs, "cache.restored", instance="m")] == [0, 0]
    for who, answer in again.items():
        assert answer["timings"]["prompt_n"] <= 8, (who, answer["timings"])


async def _wait_saves(logs: list[dict[str, Any]], count: int) -> None:
    await until(lambda: len(events(logs, "cache.saved", why="turn")) >= count, 10, "saves")


def test_a_slot_file_says_its_tokens(tmp_path: Path) -> None:
    """The header llama.cpp writes: magic, version, count, then the ids."""
    path = tmp_path / "slot-0.bin"
    path.write_bytes(kept.HEAD.pack(kept.MAGIC, 2, 3) + bytes(range(12)) + b"state")
    assert kept.tokens(path) == bytes(range(12))
    path.write_bytes(kept.HEAD.pack(kept.MAGIC, 2, 9) + b"short")
    assert kept.tokens(path) is None
    path.write_bytes(b"not a slot file")
    assert kept.tokens(path) is None


def test_set_aside_then_superseded_by_the_same_conversation_grown(tmp_path: Path) -> None:
    """A slot's file set aside is kept under a number of its own; a newer file whose
    tokens start with its tokens removes it, one that does not leaves it."""

    def write(slot: int, ids: bytes) -> None:
        path = tmp_path / files.data_name(slot)
        path.write_bytes(kept.HEAD.pack(kept.MAGIC, 2, len(ids) // 4) + ids + b"kv")
        files.record(tmp_path, slot, {}, len(ids) // 4, path.stat().st_size, kept.digest(ids))

    first, other = bytes(range(8)), bytes(range(40, 48))
    write(0, first)
    kept.set_aside(tmp_path, 0)
    write(0, other)
    kept.set_aside(tmp_path, 0)
    assert sorted(s.slot for s in files.saved(tmp_path)) == [files.KEPT, files.KEPT + 1]
    assert kept.superseded(tmp_path, bytes(range(4)) + bytes(range(40, 48))) == []
    gone = kept.superseded(tmp_path, first + bytes(range(8, 12)))
    assert [g.slot for g in gone] == [files.KEPT]
    assert [s.to_dict(0.0)["slot"] for s in files.saved(tmp_path)] == [None]
