"""A reload that changes or removes a model with a stream in flight: the stream ends
intact first, then the old process goes; new requests meet the new process (or 404)."""

from __future__ import annotations

import os
import shutil
import threading
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from gateway_helpers import LONG, Gw, gateway
from held_request import Held
from helpers import free_port, listening_on, stand_in_binary, wait_for
from test_reload_gateway import _toml

from llamad.client.http import Client

pytestmark = pytest.mark.timeout(150)


class _Call(threading.Thread):
    """One request, answered in the background."""

    def __init__(self, method: str, url: str, **kw: Any) -> None:
        super().__init__(daemon=True)
        self.method, self.url, self.kw = method, url, kw
        self.resp: httpx.Response | None = None

    def run(self) -> None:
        self.resp = httpx.request(self.method, self.url, timeout=120, **self.kw)


def _rewrite(gw: Gw, edit: Any) -> None:
    doc = tomllib.loads(gw.ld.config.read_text())
    edit(doc["instances"])
    gw.ld.config.write_text(_toml(doc))


def test_a_changed_model_drains_then_restarts(tiny_model: Path) -> None:
    with gateway(tiny_model, {"x": LONG}) as gw:
        stream, old_pid = _changed_while_streaming(gw)
        # A new request is held while x drains: it must not reach the old process.
        props = _Call("GET", f"{gw.base}/props", params={"model": "x"})
        props.start()
        wait_for(lambda: gw.ld.instance("x")["gateway"]["queued"] == 1, 10, "props queued")
        assert gw.ld.running("x") == old_pid
        # The reload is applied, and says what it left draining in the background.
        (reloaded,) = gw.ld.wait_event("config.reloaded", timeout=10)
        assert (reloaded["changed"], reloaded["draining"]) == (["x"], ["x"])
        assert gw.ld.status()["daemon"]["draining"] == ["x"]
        assert not gw.ld.events("config.drained")
        # Nor may a person restart it meanwhile: the old launch would come back.
        for verb in ("start", "restart"):
            status, _ = Client(gw.ld.socket).request("POST", f"/v1/instances/x/{verb}")
            assert status == 409
        _finish(stream)
        gw.ld.wait_event("config.drained", instance="x", outcome="restarted", timeout=30)
        assert gw.ld.status()["daemon"]["draining"] == []
        props.join(60)
        assert props.resp is not None
        assert props.resp.status_code == 200, props.resp.text
        new_pid = gw.ld.wait_running("x", not_pid=old_pid)
        assert props.resp.json()["default_generation_settings"]["n_ctx"] == 512
        assert gw.ld.running("x") == new_pid
        after = {"model": "x", "prompt": "hi", "max_tokens": 2}
        assert httpx.post(stream.url, json=after, timeout=30).status_code == 200


def test_a_model_added_while_another_drains_answers_at_once(tiny_model: Path) -> None:
    """x changes with a stream in flight; y, added by a later save, answers while the
    stream still runs; the stream ends intact, then x restarts with its new spec."""
    with gateway(tiny_model, {"x": LONG}) as gw:
        stream, old_pid = _changed_while_streaming(gw)
        gw.ld.wait_event("config.reloaded", changed=["x"], timeout=10)
        _rewrite(gw, lambda inst: inst.update(y={**inst["x"], "port": free_port()}))
        gw.ld.wait_event("config.reloaded", added=["y"], draining=["x"], timeout=10)
        body = {"model": "y", "prompt": "hi", "max_tokens": 2}
        assert httpx.post(stream.url, json=body, timeout=60).status_code == 200
        assert stream.is_alive(), "y waited for x's stream"
        assert gw.ld.running("x") == old_pid
        _finish(stream)
        gw.ld.wait_running("x", not_pid=old_pid, timeout=30)
        assert _n_ctx(gw, "x") == 512


def test_a_removed_model_brought_back_holds_its_requests(tiny_model: Path) -> None:
    """x is removed with a stream in flight (404 to new requests), then brought back
    with another spec before the stream ends: new requests wait for x's restart (never
    a 404, never the old process), and one process serves x at a time."""
    with gateway(tiny_model, {"x": LONG, "y": LONG}) as gw:
        stream, old_pid = _streaming(gw)
        saved = tomllib.loads(gw.ld.config.read_text())["instances"]["x"]
        _rewrite(gw, lambda inst: inst.pop("x"))
        gw.ld.wait_event("config.reloaded", removed=["x"], timeout=10)
        body = {"model": "x", "prompt": "hi", "max_tokens": 2}
        assert httpx.post(stream.url, json=body, timeout=10).status_code == 404
        _rewrite(gw, lambda inst: inst.update(x={**saved, "ctx_size": 512}))
        gw.ld.wait_event("config.reloaded", added=["x"], draining=["x"], timeout=10)
        props = _Call("GET", f"{gw.base}/props", params={"model": "x"})
        props.start()
        wait_for(lambda: gw.ld.instance("x")["gateway"]["queued"] == 1, 10, "props queued")
        assert gw.ld.running("x") == old_pid
        _finish(stream)
        props.join(60)
        assert props.resp is not None
        assert props.resp.status_code == 200, props.resp.text
        assert props.resp.json()["default_generation_settings"]["n_ctx"] == 512
        gw.ld.wait_event("config.drained", instance="x", outcome="restarted", timeout=30)
        assert len(listening_on(saved["port"])) == 1


def test_a_daemon_stopped_while_a_drain_runs_stops_in_time(tiny_model: Path) -> None:
    """SIGTERM while x drains: the drain is abandoned, every instance stops within its
    stop deadline, and no child is left."""
    with gateway(tiny_model, {"x": LONG}) as gw:
        stream, pid = _changed_while_streaming(gw)
        gw.ld.wait_event("config.reloaded", draining=["x"], timeout=10)
        t0 = time.monotonic()
        assert gw.ld.stop(timeout=30) == 0
        assert time.monotonic() - t0 < 20
        stream.go.set()
        stream.join(30)
        assert pid is not None
        assert not psutil.pid_exists(pid)


def _streaming(gw: Gw) -> tuple[Held, int | None]:
    """A stream to x in flight (its first chunk read, the rest held), and x's pid."""
    pid = gw.ld.running("x")
    stream = Held(gw.base, "x")
    stream.start()
    assert stream.first.wait(30)
    return stream, pid


def _changed_while_streaming(gw: Gw) -> tuple[Held, int | None]:
    """`_streaming`, then x's spec changed: the reload drains x."""
    stream, pid = _streaming(gw)
    _rewrite(gw, lambda inst: inst["x"].update(ctx_size=512))
    gw.ld.wait_event("gateway.draining", in_flight={"x": 1}, timeout=10)
    return stream, pid


def _finish(stream: Held) -> None:
    """Let the held stream run to its end; it must arrive whole."""
    stream.go.set()
    stream.join(90)
    assert stream.intact(), stream.lines[-2:]


def _n_ctx(gw: Gw, name: str) -> int:
    props = httpx.get(f"{gw.base}/props", params={"model": name}, timeout=60)
    return int(props.json()["default_generation_settings"]["n_ctx"])


def test_a_removed_model_finishes_its_stream_then_answers_404(tiny_model: Path) -> None:
    with gateway(tiny_model, {"x": LONG, "y": LONG}) as gw:
        stream, _ = _streaming(gw)
        _rewrite(gw, lambda inst: inst.pop("x"))
        gw.ld.wait_event("gateway.draining", in_flight={"x": 1}, timeout=10)
        url = f"{gw.base}/v1/completions"
        body = {"model": "x", "prompt": "hi", "max_tokens": 2}
        assert httpx.post(url, json=body, timeout=10).status_code == 404
        assert gw.ld.instance("x")["state"] == "running"
        # Nobody may start it again meanwhile: it would hold the port it hands on.
        status, _ = Client(gw.ld.socket).request("POST", "/v1/instances/x/start")
        assert status == 409
        _finish(stream)
        gw.ld.wait_event("config.drained", instance="x", outcome="removed", timeout=30)
        assert httpx.post(url, json=body, timeout=10).status_code == 404
        assert httpx.post(url, json={**body, "model": "y"}, timeout=30).status_code == 200


def test_a_replaced_model_file_drains_then_restarts(tiny_model: Path, tmp_path: Path) -> None:
    """A model file replaced on disk restarts its instance as a config change does: the
    stream in flight ends intact first, and the restart waits for it."""
    model = tmp_path / "m.gguf"
    shutil.copy(tiny_model, model)
    with gateway(model, {"x": LONG}) as gw:

        def replace_file() -> None:
            fresh = tmp_path / "m.new"
            shutil.copy(tiny_model, fresh)
            os.replace(fresh, model)  # as a download tool finishes: a new file in its place
            gw.ld.wait_event("model.changed", instance="x", timeout=10)

        stream = _restarted_after_its_stream(gw, replace_file)
        after = {"model": "x", "prompt": "hi", "max_tokens": 2}
        assert httpx.post(stream.url, json=after, timeout=30).status_code == 200


def test_a_new_binary_rolls_out_behind_the_drain(
    tiny_model: Path, llama_server: Path, tmp_path: Path
) -> None:
    """A rolling upgrade restarts an instance only once its stream in flight has ended."""
    wrapper = tmp_path / "llama-server"
    stand_in_binary(wrapper, llama_server)
    with gateway(tiny_model, {"x": LONG}, daemon={"llama_server": str(wrapper)}) as gw:

        def upgrade() -> None:
            stand_in_binary(wrapper, llama_server, note="upgraded")
            gw.ld.wait_event("binary.changed", timeout=10)

        _restarted_after_its_stream(gw, upgrade)


def _restarted_after_its_stream(gw: Gw, restart: Callable[[], None]) -> Held:
    """With a stream to x in flight, `restart` sets a restart of x going: it drains, x
    keeps its process until the stream has ended intact, then comes back new."""
    stream, old_pid = _streaming(gw)
    restart()
    gw.ld.wait_event("gateway.draining", in_flight={"x": 1}, timeout=10)
    assert gw.ld.running("x") == old_pid
    _finish(stream)
    gw.ld.wait_running("x", not_pid=old_pid)
    return stream
