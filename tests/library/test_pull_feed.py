"""Pulls and removals in process: a pull of a model cannot start while that model's
files are being removed (the check and the mark are one step), and a pull's feed keeps
the newest line per file and status, not every progress line ever said."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from library_helpers import ollama_store

from llamad.library.listing import Library
from llamad.library.progress import PullError
from llamad.library.pulled import pulled_files
from llamad.library.pulls import Pull, Pulls
from llamad.library.remove import Busy
from llamad.library.scan import OLLAMA_PULLS, scan

pytestmark = pytest.mark.timeout(30)
NAME = "tinyllama:1b"


def _library(pull_dir: Path) -> Library:
    found = scan([], pull_dir, pulled_files(pull_dir))
    assert [m.source for m in found.models] == ["pulled:ollama"]
    # Served by an instance of its own: removing it unloads that first (an await).
    return Library((), pull_dir, "http://127.0.0.1:1", tuple(found.models), {NAME: NAME})


async def test_a_pull_cannot_start_while_its_model_is_being_removed(
    tmp_path: Path, tiny_model: Path
) -> None:
    pull_dir = tmp_path / "pull"
    manifest = ollama_store(pull_dir / OLLAMA_PULLS, "tinyllama", "1b", tiny_model)
    lib = _library(pull_dir)
    unloading, unloaded = asyncio.Event(), asyncio.Event()

    async def unload(_instance: str) -> None:
        unloading.set()
        await unloaded.wait()

    async def reload() -> None:
        return None

    pulls = Pulls(lambda: lib, reload, unload)
    stop = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        group.create_task(pulls.run(stop))  # holds its task group before the removal runs
        removing = group.create_task(pulls.remove(NAME))
        await asyncio.wait_for(unloading.wait(), 5)
        # Between the removal's check and its deletion: no pull of the model starts...
        with pytest.raises(PullError, match="is being removed"):
            pulls.start(NAME)
        assert pulls.active == {}
        with pytest.raises(Busy):  # ...nor a second removal
            await pulls.remove(NAME)
        unloaded.set()
        done = await asyncio.wait_for(removing, 10)
        assert done["model"] == NAME
        assert not manifest.exists()
        pull = pulls.start(NAME)  # once removed, it may be pulled again
        last = [e async for e in pull.follow()][-1]
        assert "cannot reach the registry" in last["error"]
        stop.set()


async def test_a_pulls_feed_keeps_the_newest_line_of_each_file() -> None:
    pull = Pull("big")
    pull.publish({"status": "pulling manifest"})
    live = pull.follow()
    assert await anext(live) == {"status": "pulling manifest"}
    for i in range(1, 20_001):
        for digest in ("sha256:a", "sha256:b"):
            pull.publish({"status": "pulling", "digest": digest, "total": 20_000, "completed": i})
        if i % 5_000 == 0:
            pull.publish({"status": "verifying sha256 digest"})
    # A lagging follower gets each file's newest line, not the 40,000 it missed.
    behind = [await anext(live) for _ in range(3)]
    assert [(e.get("digest"), e.get("completed")) for e in behind] == [
        ("sha256:a", 20_000),
        ("sha256:b", 20_000),
        (None, None),
    ]
    pull.publish({"status": "success"}, end=True)
    assert [e async for e in live] == [{"status": "success"}]
    assert len(pull.events) == 5  # manifest, two files, verifying, success
    late = [e async for e in pull.follow()]
    assert late == pull.events
    assert late[0] == {"status": "pulling manifest"}
    assert late[-1] == {"status": "success"}
    assert pull.progress() == (40_000, 40_000)
