"""Hot reload on the real llama-server: only what changed restarts; mistakes change nothing."""

from __future__ import annotations

import os
import shutil
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import Llamad, free_port, stand_in_binary, wait_for, write_config

from llamad.client.http import APIError

FAST = {
    "health_interval": 0.2,
    "health_timeout": 0.5,
    "unhealthy_after": 3,
    "start_timeout": 10.0,
    "stop_timeout": 3.0,
    "backoff_initial": 0.1,
    "backoff_max": 0.5,
}


class Setup:
    """A config file the test rewrites, and the daemon running it."""

    def __init__(self, tmp: Path, model: Path, llama_server: str | None = None) -> None:
        self.tmp, self.model = tmp, model
        self.path = tmp / "conf" / "llamad.toml"
        self.path.parent.mkdir()
        self.daemon: dict[str, Any] = {"state_dir": str(tmp / "state")}
        if llama_server:
            self.daemon["llama_server"] = llama_server
        self.supervise = dict(FAST)
        self.defaults: dict[str, Any] = {"n_parallel": 1}
        self.instances: dict[str, dict[str, Any]] = {}

    def add(self, name: str, **keys: Any) -> int:
        port = keys.pop("port", None) or free_port()
        self.instances[name] = {"model": self.model, "port": port, **keys}
        return int(port)

    def text(self) -> str:
        scratch = self.tmp / "scratch.toml"
        write_config(scratch, self.instances, self.daemon, self.supervise, self.defaults)
        return scratch.read_text()

    def save_atomic(self, text: str | None = None) -> None:
        """Save as editors do: write a temporary file, then rename it over the config."""
        tmp = self.path.with_name(".llamad.toml.swp")
        tmp.write_text(text if text is not None else self.text())
        os.replace(tmp, self.path)

    def save_in_place(self, text: str | None = None) -> None:
        """Save as `cat > file` does: truncate and write the same inode."""
        with self.path.open("w") as fh:
            fh.write(text if text is not None else self.text())


def pids(d: Llamad) -> dict[str, int | None]:
    return {i["name"]: i["pid"] for i in d.status()["instances"]}


def wait_serving(d: Llamad, name: str, not_pid: int | None = None, timeout: float = 15) -> int:
    def ok() -> int | None:
        try:
            doc = d.instance(name)
        except APIError:  # not added yet
            return None
        if doc["state"] == "running" and doc["pid"] != not_pid:
            return int(doc["pid"])
        return None

    return int(wait_for(ok, timeout, f"{name} running"))


def n_ctx(port: int) -> int:
    props = httpx.get(f"http://127.0.0.1:{port}/props", timeout=5).json()
    return int(props["default_generation_settings"]["n_ctx"])


@contextmanager
def hammer(port: int) -> Iterator[dict[str, int]]:
    """Keep requesting /health and /completion from `port`; count failures."""
    counts = {"ok": 0, "failed": 0}
    stop = threading.Event()

    def loop() -> None:
        with httpx.Client(timeout=5) as client:
            while not stop.is_set():
                try:
                    h = client.get(f"http://127.0.0.1:{port}/health")
                    c = client.post(
                        f"http://127.0.0.1:{port}/completion", json={"prompt": "a", "n_predict": 2}
                    )
                    good = h.status_code == 200 and c.status_code == 200
                except httpx.HTTPError:
                    good = False
                counts["ok" if good else "failed"] += 1

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield counts
    finally:
        stop.set()
        thread.join(10)


@pytest.fixture
def setup(tmp_path: Path, tiny_model: Path) -> Setup:
    return Setup(tmp_path, tiny_model)


def start(setup: Setup) -> Llamad:
    setup.save_atomic()
    d = Llamad(setup.path)
    d.wait_ready()
    for name in setup.instances:
        wait_serving(d, name)
    return d


def test_changed_instance_restarts_others_keep_serving(setup: Setup) -> None:
    """An atomic-rename save restarts only the changed instance; a client never notices."""
    a = setup.add("a", ctx_size=256)
    b = setup.add("b")
    setup.add("c")
    with start(setup) as d:
        before = pids(d)
        with hammer(b) as counts:
            wait_for(lambda: counts["ok"] > 3, 10, "client warmed up")
            setup.instances["a"]["ctx_size"] = 512
            setup.save_atomic()
            wait_serving(d, "a", not_pid=before["a"])
            wait_for(lambda: counts["ok"] > 10, 10, "more requests")
        assert counts["failed"] == 0
        after = pids(d)
        assert after["b"] == before["b"]
        assert after["c"] == before["c"]
        assert n_ctx(a) == 512
        reloaded = d.wait_event("config.reloaded")[0]
        assert reloaded["changed"] == ["a"]
        assert sorted(reloaded["unchanged"]) == ["b", "c"]
        assert d.stop() == 0


def test_in_place_write_is_seen(setup: Setup) -> None:
    """A plain truncate-and-write save (cat > file) reloads too."""
    a = setup.add("a", ctx_size=256)
    with start(setup) as d:
        pid = pids(d)["a"]
        setup.instances["a"]["ctx_size"] = 1024
        setup.save_in_place()
        wait_serving(d, "a", not_pid=pid)
        assert n_ctx(a) == 1024
        assert d.stop() == 0


def test_invalid_then_fixed(setup: Setup) -> None:
    """A bad save changes nothing and shows in status; the next good save clears it."""
    setup.add("a", ctx_size=256)
    b = setup.add("b")
    with start(setup) as d:
        before = pids(d)
        with hammer(b) as counts:
            setup.save_atomic(setup.text() + "\n[instances.a\n")
            wait_for(lambda: d.status()["daemon"]["config_error"], 10, "config_error")
            err = d.status()["daemon"]["config_error"]
            assert f"{setup.path}:" in err
            assert "invalid TOML" in err
            assert pids(d) == before
            setup.instances["a"]["ctx_sise"] = 1
            setup.save_atomic()
            wait_for(lambda: "ctx_sise" in (d.status()["daemon"]["config_error"] or ""), 10, "2nd")
            assert "did you mean ctx_size?" in d.status()["daemon"]["config_error"]
            cli = d.ctl("status")
            assert "ctx_sise" in cli.stdout + cli.stderr
            del setup.instances["a"]["ctx_sise"]
            setup.instances["a"]["ctx_size"] = 512
            setup.save_atomic()
            wait_serving(d, "a", not_pid=before["a"])
            wait_for(lambda: d.status()["daemon"]["config_error"] is None, 10, "cleared")
        assert counts["failed"] == 0
        assert pids(d)["b"] == before["b"]
        assert len(d.events("config.rejected")) == 2
        assert d.stop() == 0


def test_add_remove_rename_and_port_swap(setup: Setup) -> None:
    """Added starts, removed stops, a rename and a port swap never fail to bind."""
    pa = setup.add("a")
    pb = setup.add("b")
    setup.add("gone")
    keep = setup.add("keep")
    with start(setup) as d:
        before = pids(d)
        gone_pid = before["gone"]
        del setup.instances["gone"]
        setup.instances["a"]["port"], setup.instances["b"]["port"] = pb, pa
        setup.instances["renamed"] = setup.instances.pop("keep")
        setup.add("new")
        setup.save_atomic()
        wait_for(lambda: set(pids(d)) == {"a", "b", "renamed", "new"}, 15, "new set")
        for name in ("a", "b", "renamed", "new"):
            wait_serving(d, name)
        assert d.instance("a")["port"] == pb
        assert d.instance("b")["port"] == pa
        assert d.instance("renamed")["port"] == keep
        wait_for(lambda: not _alive(gone_pid), 5, "removed instance's process gone")
        assert not d.events("instance.restart_scheduled")  # no bind failure anywhere
        assert d.stop() == 0


def test_supervise_knobs_apply_without_restart(setup: Setup) -> None:
    """A change to supervise knobs alone keeps the process."""
    setup.add("a")
    with start(setup) as d:
        pid = pids(d)["a"]
        setup.instances["a"]["supervise"] = {"health_interval": 0.5, "stop_timeout": 4.0}
        setup.save_atomic()
        reloaded = d.wait_event("config.reloaded")[0]
        assert reloaded["unchanged"] == ["a"]
        assert pids(d)["a"] == pid
        assert d.stop() == 0


def test_defaults_change_restarts_exactly_the_affected(setup: Setup) -> None:
    """A [defaults] change restarts the instances it reaches, not those that override it."""
    setup.defaults["ctx_size"] = 256
    a = setup.add("a")
    setup.add("own", ctx_size=1024)
    with start(setup) as d:
        before = pids(d)
        setup.defaults["ctx_size"] = 512
        setup.save_atomic()
        wait_serving(d, "a", not_pid=before["a"])
        assert n_ctx(a) == 512
        assert pids(d)["own"] == before["own"]
        assert d.stop() == 0


def test_model_replaced_on_disk_restarts_that_instance(setup: Setup) -> None:
    """Replacing a model file restarts its instance; watch_model = false opts out."""
    own = setup.tmp / "own.gguf"
    shutil.copy(setup.model, own)
    setup.add("watched", model=own)
    setup.add("unwatched", model=own, watch_model=False)
    setup.add("other")
    with start(setup) as d:
        before = pids(d)
        tmp = own.with_suffix(".part")
        shutil.copy(setup.model, tmp)
        os.replace(tmp, own)
        wait_serving(d, "watched", not_pid=before["watched"])
        after = pids(d)
        assert after["unwatched"] == before["unwatched"]
        assert after["other"] == before["other"]
        assert d.stop() == 0


def test_sighup_and_llamactl_reload(setup: Setup) -> None:
    """SIGHUP reloads; `llamactl reload` prints the changes and exits 2 on a bad file."""
    setup.add("a", ctx_size=256)
    with start(setup) as d:
        # Write without the watcher noticing first is impossible to arrange, so compare
        # outcomes: each trigger leads to a reload of the current content.
        d.proc.send_signal(signal.SIGHUP)
        d.wait_event("config.reloaded")
        setup.add("b")
        setup.save_atomic()
        wait_serving(d, "b")
        out = d.ctl("reload")
        assert out.returncode == 0
        assert "unchanged: a, b" in out.stdout
        setup.save_atomic("[instances.a]\nport = 'x'\n")
        bad = d.ctl("reload")
        assert bad.returncode == 2
        assert str(setup.path) in bad.stderr
        assert d.stop() == 0


def test_sighup_during_startup_is_kept_for_the_reloader(setup: Setup) -> None:
    """A SIGHUP while instances start neither ends the daemon nor is lost."""
    setup.add("a")
    setup.save_atomic()
    with Llamad(setup.path) as d:
        d.wait_event("instance.spawned")  # signal handlers are in place by then
        d.proc.send_signal(signal.SIGHUP)
        d.wait_event("config.reloaded")
        wait_serving(d, "a")
        assert d.stop() == 0


def test_failed_instance_is_retried_when_its_spec_changes(setup: Setup) -> None:
    """A failed instance whose spec changed is tried again."""
    broken = setup.tmp / "broken.gguf"
    broken.write_bytes(b"not a model" * 100)
    setup.supervise["max_restarts"] = 0
    setup.add("a", model=broken)
    setup.save_atomic()
    with Llamad(setup.path) as d:
        d.wait_ready()
        wait_for(lambda: d.instance("a")["state"] == "failed", 15, "failed")
        setup.instances["a"]["model"] = setup.model
        setup.save_atomic()
        wait_serving(d, "a")
        assert d.stop() == 0


def test_burst_of_saves_yields_one_reload(setup: Setup) -> None:
    """Five saves in a burst: one reload, of the final content."""
    a = setup.add("a", ctx_size=256)
    with start(setup) as d:
        pid = pids(d)["a"]
        for ctx in (300, 400, 500, 600, 768):
            setup.instances["a"]["ctx_size"] = ctx
            setup.save_atomic()
        wait_serving(d, "a", not_pid=pid)
        assert n_ctx(a) == 768
        assert len(d.events("config.reloaded")) == 1
        assert d.stop() == 0


def test_binary_change_restarts_one_at_a_time(setup: Setup, llama_server: Path) -> None:
    """A new llama-server binary restarts every instance in turn, each ready before the next."""
    wrapper = setup.tmp / "bin" / "llama-server"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec "{llama_server}" "$@"\n')
    wrapper.chmod(0o755)
    setup.daemon["llama_server"] = str(wrapper)
    for name in ("a", "b", "c"):
        setup.add(name)
    with start(setup) as d:
        before = pids(d)
        new = wrapper.with_suffix(".new")
        new.write_text(f'#!/bin/sh\n# upgraded\nexec "{llama_server}" "$@"\n')
        new.chmod(0o755)
        os.replace(new, wrapper)
        for name in ("a", "b", "c"):
            wait_serving(d, name, not_pid=before[name], timeout=20)
        starts = [
            e
            for e in d.events("instance.state_changed")
            if e["from"] == "stopping" and e["to"] == "starting"
        ]
        readies = d.events("instance.state_changed", to="running")[3:]
        # Each restart begins only after the previous instance is running again.
        order = sorted(
            [(e["timestamp"], "start") for e in starts]
            + [(e["timestamp"], "ready") for e in readies]
        )
        assert [kind for _, kind in order] == ["start", "ready"] * 3
        assert d.stop() == 0


def test_a_ggml_upgrade_under_the_executable_restarts_like_a_new_binary(
    setup: Setup, llama_server: Path
) -> None:
    """Homebrew's layout: `brew upgrade ggml` repoints PREFIX/opt/ggml at a new Cellar
    folder and leaves llama-server alone; the libraries it loads changed, so it restarts."""
    prefix = setup.tmp / "homebrew"
    real = prefix / "Cellar" / "llama.cpp" / "6000" / "bin" / "llama-server"
    real.parent.mkdir(parents=True)
    real.write_text(f'#!/bin/sh\nexec "{llama_server}" "$@"\n')
    real.chmod(0o755)
    for version in ("0.9.4", "0.9.5"):
        lib = prefix / "Cellar" / "ggml" / version / "lib" / "libggml-base.dylib"
        lib.parent.mkdir(parents=True)
        lib.write_text(f"ggml {version}\n")
    (prefix / "bin").mkdir()
    (prefix / "opt").mkdir()
    os.symlink("../Cellar/llama.cpp/6000/bin/llama-server", prefix / "bin" / "llama-server")
    os.symlink("../Cellar/ggml/0.9.4", prefix / "opt" / "ggml")
    setup.daemon["llama_server"] = str(prefix / "bin" / "llama-server")
    setup.add("a")
    with start(setup) as d:
        before = pids(d)
        # As brew does it: the new keg is linked, the old one's link replaced.
        os.symlink("../Cellar/ggml/0.9.5", prefix / "opt" / "ggml.new")
        os.replace(prefix / "opt" / "ggml.new", prefix / "opt" / "ggml")
        [event] = d.wait_event("binary.changed", timeout=15)
        assert event["file"] == str(prefix / "opt" / "ggml" / "lib" / "libggml-base.dylib")
        assert event["path"] == str(prefix / "bin" / "llama-server")
        wait_serving(d, "a", not_pid=before["a"], timeout=20)
        assert d.stop() == 0


def _alive(pid: int | None) -> bool:
    import psutil

    return pid is not None and psutil.pid_exists(pid) and psutil.Process(pid).status() != "zombie"


def test_broken_binary_halts_the_rollout_and_a_fixed_one_retries(
    setup: Setup, llama_server: Path
) -> None:
    """A build that answers --help/--version but cannot serve costs one instance: the
    rollout halts (`binary.rollout_halted`), the rest keep their old processes, and the
    next (fixed) build brings the failed one back and finishes the rollout."""
    wrapper = setup.tmp / "bin" / "llama-server"
    wrapper.parent.mkdir()
    stand_in_binary(wrapper, llama_server)
    setup.daemon["llama_server"] = str(wrapper)
    for name in ("a", "b", "c"):
        setup.add(name)
    with start(setup) as d:
        before = pids(d)
        stand_in_binary(wrapper, llama_server, serve='echo "error: broken build" >&2; exit 1')
        halted = d.wait_event("binary.rollout_halted", timeout=30)[0]
        first = halted["instance"]
        assert "broken build" in halted["reason"]
        others = [n for n in ("a", "b", "c") if n != first]
        assert sorted(halted["not_restarted"]) == others
        now = pids(d)
        assert all(now[n] == before[n] and _alive(now[n]) for n in others)
        stand_in_binary(wrapper, llama_server, serve=None, note="fixed")
        for name in ("a", "b", "c"):
            wait_serving(d, name, not_pid=before[name], timeout=30)
        assert d.stop() == 0
