"""The fake llama-server's fault switches do what they say (the supervisor tests rely on them)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import free_port

FAKE = Path(__file__).parents[1] / "fake_llama_server.py"
DEADLINE = 10.0  # generous for a loaded CI box; the conditions hold within milliseconds


def request(
    port: int, path: str, method: str = "GET", body: object = None, timeout: float = 2.0
) -> tuple[int, object]:
    """Send one HTTP request to the fake; return (status, decoded JSON body)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body)
        conn.request(method, path, body=data)
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def status(port: int, path: str = "/health") -> int | None:
    """Status of GET ``path``, or None while nothing accepts connections."""
    try:
        return request(port, path)[0]
    except ConnectionRefusedError:
        return None


def wait_for(cond: Callable[[], bool], what: str) -> None:
    """Poll ``cond`` until it holds; fail the test after DEADLINE seconds."""
    end = time.monotonic() + DEADLINE
    while not cond():
        if time.monotonic() > end:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.01)  # poll interval, not synchronisation: cond decides


@contextmanager
def fake(
    tmp_path: Path, *args: str, **env: str
) -> Iterator[tuple[subprocess.Popen[bytes], int, Path]]:
    """Run the fake on a free port with ``env`` switches; yield (process, port, log file).

    The process is killed and reaped on the way out whatever the test did.
    """
    port = free_port()
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMA_", "FAKE_"))}
    log = tmp_path / f"fake-{port}.log"
    with log.open("wb") as err:  # the child keeps its own copy of the descriptor
        proc = subprocess.Popen(
            [sys.executable, str(FAKE), "--host", "127.0.0.1", "--port", str(port), *args],
            env={**clean, **env},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    try:
        yield proc, port, log
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=DEADLINE)


def test_loading_then_ready_then_clean_sigterm(tmp_path: Path) -> None:
    env = {"FAKE_LOAD_SECONDS": "0.5", "LLAMA_API_KEY": "s3cret"}
    # "-cb" must be ignored, not read as "-c b"
    with fake(tmp_path, "-cb", "-c", "1234", **env) as (proc, port, log):
        wait_for(lambda: status(port) is not None, "the port to be bound")
        code, body = request(port, "/health")
        assert code == 503
        assert body == {
            "error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}
        }
        assert status(port, "/v1/models") == 200  # up while loading, so it is no readiness
        wait_for(lambda: status(port) == 200, "/health 200")
        assert request(port, "/props") == (200, {"default_generation_settings": {"n_ctx": 1234}})
        assert request(port, "/completion", "POST", {"prompt": "hi"}) == (200, {"content": "ok"})
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=DEADLINE) == 0
        text = log.read_text()
        assert f"main: server is listening on http://127.0.0.1:{port}" in text
        assert "api key length = 6" in text
        assert "s3cret" not in text


def test_env_host_port_and_ignored_sigterm(tmp_path: Path) -> None:
    # No --port here: the port must come from LLAMA_ARG_PORT, as llama-server takes it.
    port = free_port()
    env = {"LLAMA_ARG_PORT": str(port), "LLAMA_ARG_CTX_SIZE": "99", "FAKE_IGNORE_SIGTERM": "1"}
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("LLAMA_", "FAKE_"))}
    proc = subprocess.Popen(
        [sys.executable, str(FAKE)], env={**clean, **env}, stderr=subprocess.DEVNULL
    )
    try:
        wait_for(lambda: status(port) == 200, "/health 200")
        assert request(port, "/props")[1] == {"default_generation_settings": {"n_ctx": 99}}
        proc.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.5)  # a bounded check that it stays up, not a sync sleep
        assert status(port) == 200
    finally:
        proc.kill()
        assert proc.wait(timeout=DEADLINE) == -signal.SIGKILL


def test_hang_after_ready_keeps_the_socket_but_never_answers(tmp_path: Path) -> None:
    with fake(tmp_path, FAKE_HANG_AFTER="0.5") as (proc, port, _):
        wait_for(lambda: status(port) == 200, "/health 200")

        def hung() -> bool:
            try:
                request(port, "/health", timeout=0.3)
            except TimeoutError:
                return True
            return False

        wait_for(hung, "/health to stop answering")
        assert proc.poll() is None  # a hang, not an exit


@pytest.mark.parametrize(
    ("env", "code", "message"),
    [
        ({"FAKE_EXIT_AFTER": "0.2", "FAKE_EXIT_CODE": "3"}, 3, "FAKE_EXIT_AFTER"),
        ({"FAKE_EXIT_AFTER": "0"}, 1, "FAKE_EXIT_AFTER"),
        ({"FAKE_BIND_FAIL": "1"}, 1, "couldn't bind HTTP server socket"),
    ],
)
def test_exits(tmp_path: Path, env: dict[str, str], code: int, message: str) -> None:
    with fake(tmp_path, **env) as (proc, _, log):
        assert proc.wait(timeout=DEADLINE) == code
        assert message in log.read_text()


def test_port_in_use_fails_like_llama_server(tmp_path: Path) -> None:
    with fake(tmp_path) as (_, port, _):
        wait_for(lambda: status(port) == 200, "the first fake to listen")
        # The later --port wins, so the second fake tries the first one's port.
        with fake(tmp_path, "--port", str(port)) as (second, _, log):
            assert second.wait(timeout=DEADLINE) == 1
            assert "couldn't bind HTTP server socket" in log.read_text()


def test_crash_file_fails_starts_until_removed(tmp_path: Path) -> None:
    crash = tmp_path / "crash"
    crash.touch()
    with fake(tmp_path, FAKE_CRASH_FILE=str(crash)) as (proc, _, _):
        assert proc.wait(timeout=DEADLINE) == 1
    crash.unlink()
    with fake(tmp_path, FAKE_CRASH_FILE=str(crash)) as (_, port, _):
        wait_for(lambda: status(port) == 200, "/health 200 once the crash file is gone")
