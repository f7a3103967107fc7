"""Configs that are symlinks swapped from elsewhere: a Kubernetes ConfigMap's `..data`
swap and a plain symlink swap (Nix home-manager) each reload once, never half-read."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from helpers import Llamad, free_port, write_config

FAST = {
    "health_interval": 0.2,
    "health_timeout": 0.5,
    "start_timeout": 10.0,
    "stop_timeout": 3.0,
    "backoff_initial": 0.1,
    "backoff_max": 0.5,
}


class ConfigMap:
    """A mounted ConfigMap's directory, updated as the kubelet's atomic writer does it:
    a new timestamped directory, `..data_tmp` pointing at it renamed over `..data`, the
    old directory removed; `llamad.toml` is a symlink to `..data/llamad.toml` that never
    changes itself."""

    def __init__(self, mount: Path) -> None:
        self.mount = mount
        mount.mkdir()
        self.path = mount / "llamad.toml"
        self.swaps = 0

    def publish(self, text: str, pieces: int = 1) -> None:
        self.swaps += 1
        stamp = datetime.now(UTC).strftime("..%Y_%m_%d_%H_%M_%S.") + f"{self.swaps:09d}"
        new = self.mount / stamp
        new.mkdir()
        # Written in pieces with flushes: a watcher that read it now would see half.
        step = -(-len(text) // pieces)
        with (new / "llamad.toml").open("w") as fh:
            for i in range(0, len(text), step):
                fh.write(text[i : i + step])
                fh.flush()
                os.fsync(fh.fileno())
        data, tmp = self.mount / "..data", self.mount / "..data_tmp"
        old = os.readlink(data) if data.is_symlink() else None
        os.symlink(stamp, tmp)
        os.replace(tmp, data)
        if not self.path.is_symlink():
            os.symlink("..data/llamad.toml", self.path)
        if old is not None:
            (self.mount / old / "llamad.toml").unlink()
            (self.mount / old).rmdir()


class StoreLink:
    """A config that is a symlink into a store of immutable files, re-pointed by
    renaming a new link over it (how Nix home-manager and other dotfile managers switch)."""

    def __init__(self, home: Path, store: Path) -> None:
        self.store, self.path = store, home / "llamad.toml"
        home.mkdir()
        store.mkdir()
        self.swaps = 0

    def publish(self, text: str, pieces: int = 1) -> None:
        self.swaps += 1
        target = self.store / f"{self.swaps:032x}-llamad.toml"
        target.write_text(text)
        tmp = self.path.with_name(".llamad.toml.tmp")
        os.symlink(target, tmp)
        os.replace(tmp, self.path)


def config_text(tmp: Path, model: Path, port: int, ctx: int, extra: str = "") -> str:
    scratch = tmp / "scratch.toml"
    instances: dict[str, dict[str, Any]] = {"a": {"model": model, "port": port, "ctx_size": ctx}}
    write_config(scratch, instances, {"state_dir": str(tmp / "state")}, FAST, {"n_parallel": 1})
    return scratch.read_text() + extra


@pytest.mark.parametrize("how", ["configmap", "store-link"])
def test_symlink_swap_reloads_once(tmp_path: Path, tiny_model: Path, how: str) -> None:
    """Each swap is one reload of the whole new file; a bad one leaves the instances
    running as they were, and the next good one applies."""
    port = free_port()
    conf = (
        ConfigMap(tmp_path / "conf")
        if how == "configmap"
        else StoreLink(tmp_path / "home", tmp_path / "store")
    )
    conf.publish(config_text(tmp_path, tiny_model, port, 256))
    with Llamad(conf.path) as d:
        d.wait_ready()
        pid = d.wait_running("a")
        conf.publish(config_text(tmp_path, tiny_model, port, 512), pieces=8)
        pid = d.wait_running("a", not_pid=pid)
        assert len(d.wait_event("config.reloaded")) == 1
        # A bad ConfigMap: rejected, and what runs is left alone.
        conf.publish(config_text(tmp_path, tiny_model, port, 768, "\n[instances.a\n"), pieces=8)
        d.wait_event("config.rejected")
        assert d.running("a") == pid
        conf.publish(config_text(tmp_path, tiny_model, port, 1024), pieces=8)
        d.wait_running("a", not_pid=pid)
        reloads = d.wait_event("config.reloaded", count=2)
        # One reload for each good swap (none twice, none of a half-written file), one
        # rejection for the bad one.
        assert len(reloads) == 2
        assert [r["changed"] for r in reloads] == [["a"], ["a"]]
        assert len(d.events("config.rejected")) == 1
        assert d.stop() == 0
