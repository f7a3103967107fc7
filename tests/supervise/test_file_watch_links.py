"""The config watch through symlinks: a swap of a link on the way to the config wakes the
watch by its own events (not the quiet poll) and moves the config once; a directory on
the way that merely changes its contents moves nothing."""

from __future__ import annotations

import asyncio
import contextlib
import os
from pathlib import Path

from helpers import until

from llamad.common.symlinks import links
from llamad.config.load import load
from llamad.supervise.file_watch import FileWatch


def test_links_follows_the_chain_as_the_kernel_does(tmp_path: Path) -> None:
    (tmp_path / "..2026_12_06_15_00_00.1").mkdir()
    (tmp_path / "..2026_12_06_15_00_00.1" / "llamad.toml").write_text("")
    os.symlink("..2026_12_06_15_00_00.1", tmp_path / "..data")
    os.symlink("..data/llamad.toml", tmp_path / "llamad.toml")
    os.symlink(tmp_path, tmp_path / "mount")  # absolute, and a directory
    assert links(tmp_path / "mount" / "llamad.toml") == [
        tmp_path / "mount",
        tmp_path / "llamad.toml",
        tmp_path / "..data",
    ]
    (tmp_path / "sub").mkdir()
    os.symlink("../llamad.toml", tmp_path / "sub" / "up")  # `..` from where a link led
    assert links(tmp_path / "sub" / "up") == [
        tmp_path / "sub" / "up",
        tmp_path / "llamad.toml",
        tmp_path / "..data",
    ]
    assert links(tmp_path / "..2026_12_06_15_00_00.1" / "llamad.toml") == []


def publish(mount: Path, stamp: str, text: str) -> None:
    """The kubelet's atomic writer: a new directory, `..data` swapped, the old one gone."""
    (mount / stamp).mkdir()
    (mount / stamp / "llamad.toml").write_text(text)
    old = os.readlink(mount / "..data") if (mount / "..data").is_symlink() else None
    os.symlink(stamp, mount / "..data_tmp")
    os.replace(mount / "..data_tmp", mount / "..data")
    if not (mount / "llamad.toml").is_symlink():
        os.symlink("..data/llamad.toml", mount / "llamad.toml")
    if old is not None:
        (mount / old / "llamad.toml").unlink()
        (mount / old).rmdir()


async def test_configmap_swap_wakes_the_watch_and_moves_the_config(tmp_path: Path) -> None:
    mount = tmp_path / "conf"
    mount.mkdir()
    text = f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n'
    publish(mount, "..2026_12_06_15_00_00.1", text)
    # A quiet wake far away: only the swap's own events can wake the watch in time.
    watch = FileWatch(load(mount / "llamad.toml"), quiet_wake=600)
    moves: list[dict[Path, str]] = []
    wakes = [0]

    async def woke() -> None:
        wakes[0] += 1
        if moved := watch.moved():
            moves.append(moved)

    async def watching() -> None:
        # The watch is in place once touching the link (which moves nothing) wakes it.
        while not wakes[0]:
            os.utime(mount / "llamad.toml", follow_symlinks=False)
            with contextlib.suppress(AssertionError):
                await until(lambda: wakes[0], 0.5, "a wake")

    stop = asyncio.Event()
    async with asyncio.TaskGroup() as group:
        group.create_task(watch.run(stop, woke))
        await asyncio.wait_for(watching(), 10)
        publish(mount, "..2026_12_06_15_01_00.2", text + "# changed\n")
        await until(lambda: moves, 5, "the swap woke the watch")
        stop.set()
    assert moves == [{mount / "llamad.toml": "config"}]


def test_what_moves_is_the_config_s_text_not_the_links(tmp_path: Path) -> None:
    """`/etc -> v1`, re-pointed: a file written beside the config moves nothing, a swap to
    the same text moves nothing, a swap to other text moves the config alone."""
    text = f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n'
    for version, body in (("v1", text), ("v2", text), ("v3", text + "# changed\n")):
        (tmp_path / version).mkdir()
        (tmp_path / version / "llamad.toml").write_text(body)
    os.symlink("v1", tmp_path / "etc")
    watch = FileWatch(load(tmp_path / "etc" / "llamad.toml"))
    (tmp_path / "v1" / "other.toml").write_text("")
    assert watch.moved() == {}
    for version, moved in (("v2", {}), ("v3", {tmp_path / "etc" / "llamad.toml": "config"})):
        os.symlink(version, tmp_path / "etc.new")
        os.replace(tmp_path / "etc.new", tmp_path / "etc")
        assert watch.moved() == moved
