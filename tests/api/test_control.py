"""The control API served for real on a Unix socket, against a fake controller."""

from __future__ import annotations

import asyncio
import io
import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from structlog.testing import capture_logs

from llamad.api.app import SocketInUse, create_app, serve_unix
from llamad.api.app import tail_offset as tail_offset_of
from llamad.api.errors import Conflict, InvalidConfig, UnknownInstance
from llamad.api.uds import bind_unix
from llamad.client.http import Client, Unreachable

ROOT = os.getuid() == 0


def instance_doc(name: str, state: str = "running") -> dict[str, Any]:
    return {
        "name": name,
        "state": state,
        "pid": 4567 if state == "running" else None,
        "host": "127.0.0.1",
        "port": 8089,
        "model": f"/models/{name}.gguf",
        "restarts": 0,
        "uptime_s": 10.1,
        "health": None,
        "last_exit": None,
        "error": None,
        "rss_bytes": 123456789,
        "cpu_percent": 0.0,
    }


class FakeController:
    """Answers like the daemon; `boom` fails unexpectedly, `busy` conflicts."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.docs = {n: instance_doc(n) for n in ("qwen", "llama", "busy", "boom")}
        self.reload_error: str | None = None
        self.calls: list[tuple[str, str]] = []

    def status(self) -> dict[str, Any]:
        daemon = {"pid": os.getpid(), "version": "0.1.0", "config_error": None}
        return {"daemon": daemon, "instances": list(self.docs.values())}

    def instance(self, name: str) -> dict[str, Any]:
        if name == "boom":
            raise RuntimeError("secret internals")
        if name not in self.docs:
            raise UnknownInstance(name)
        return self.docs[name]

    async def _command(self, verb: str, name: str, state: str) -> dict[str, Any]:
        self.calls.append((verb, name))
        doc = self.instance(name)
        if name == "busy":
            raise Conflict("busy is being removed")
        await asyncio.sleep(0)
        doc["state"] = state
        return doc

    async def start(self, name: str, wait: float | None = None) -> dict[str, Any]:
        return await self._command("start", name, "starting")

    async def stop(self, name: str, wait: float | None = None) -> dict[str, Any]:
        return await self._command("stop", name, "stopping")

    async def restart(self, name: str, wait: float | None = None) -> dict[str, Any]:
        return await self._command("restart", name, "starting")

    async def reload(self) -> dict[str, Any]:
        if self.reload_error:
            raise InvalidConfig(self.reload_error)
        return {"added": ["new"], "changed": [], "removed": ["old"], "unchanged": ["qwen"]}

    def log_file(self, name: str) -> Path:
        self.instance(name)
        return self.log_dir / f"{name}.log"


@dataclass
class Served:
    path: Path
    ctl: FakeController
    shutdown: asyncio.Event
    task: asyncio.Task[None]

    def http(self, **kw: Any) -> httpx.AsyncClient:
        transport = httpx.AsyncHTTPTransport(uds=str(self.path))
        return httpx.AsyncClient(transport=transport, base_url="http://llamad", **kw)

    async def request(self, method: str, path: str) -> tuple[int, Any]:
        # The stdlib client blocks; a thread keeps the loop free to serve it.
        return await asyncio.to_thread(Client(self.path).request, method, path)

    async def stop(self, within: float = 3.0) -> None:
        self.shutdown.set()
        await asyncio.wait_for(self.task, within)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A directory under /tmp: AF_UNIX paths must stay short (pytest's tmp_path may not)."""
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="llamad-t"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


async def start_server(
    path: Path, ctl: FakeController, app_shutdown: bool = True, **kw: Any
) -> Served:
    shutdown = asyncio.Event()
    app = create_app(ctl, shutdown=shutdown if app_shutdown else None)
    bound = asyncio.Event()
    task = asyncio.create_task(serve_unix(app, path, shutdown, on_bound=bound.set, **kw))
    await asyncio.wait_for(bound.wait(), 5)
    return Served(path, ctl, shutdown, task)


@pytest.fixture
async def served(short_dir: Path) -> AsyncIterator[Served]:
    (short_dir / "logs").mkdir()
    server = await start_server(
        short_dir / "run" / "llamad.sock", FakeController(short_dir / "logs")
    )
    yield server
    if not server.task.done():
        await server.stop()


async def test_status_and_instance_routes(served: Served) -> None:
    """GET routes return the controller's documents unchanged."""
    assert await served.request("GET", "/v1/status") == (200, served.ctl.status())
    assert await served.request("GET", "/v1/instances/qwen") == (200, instance_doc("qwen"))


@pytest.mark.parametrize(
    ("verb", "state"), [("start", "starting"), ("stop", "stopping"), ("restart", "starting")]
)
async def test_commands_return_the_doc(served: Served, verb: str, state: str) -> None:
    status, doc = await served.request("POST", f"/v1/instances/qwen/{verb}")
    assert (status, doc["state"]) == (200, state)
    assert served.ctl.calls == [(verb, "qwen")]


async def test_reload_report_and_invalid_config(served: Served) -> None:
    status, report = await served.request("POST", "/v1/reload")
    assert (status, report["added"], report["removed"]) == (200, ["new"], ["old"])
    served.ctl.reload_error = "llamad.toml:3: instances.qwen.port: not a number"
    err = {"error": {"code": "invalid_config", "message": served.ctl.reload_error}}
    assert await served.request("POST", "/v1/reload") == (422, err)


@pytest.mark.parametrize(
    ("method", "path", "status", "code"),
    [
        ("GET", "/v1/instances/nope", 404, "unknown_instance"),
        ("POST", "/v1/instances/nope/start", 404, "unknown_instance"),
        ("POST", "/v1/instances/busy/stop", 409, "conflict"),
        ("GET", "/v1/nothing/here", 404, "not_found"),
        ("GET", "/v1/instances/qwen/start", 405, "method_not_allowed"),
        ("GET", "/v1/instances/qwen/logs?lines=-1", 400, "bad_request"),
        ("GET", "/v1/instances/qwen/logs?lines=%C2%B2", 400, "bad_request"),  # superscript 2
        ("POST", "/v1/instances/qwen/start?wait=soon", 400, "bad_request"),
        ("POST", "/v1/instances/qwen/stop?wait=-1", 400, "bad_request"),
        ("POST", "/v1/instances/qwen/restart?wait=inf", 400, "bad_request"),
    ],
)
async def test_error_shapes(served: Served, method: str, path: str, status: int, code: str) -> None:
    got_status, doc = await served.request(method, path)
    assert (got_status, doc["error"]["code"]) == (status, code)
    assert isinstance(doc["error"]["message"], str)
    assert doc["error"]["message"]


async def test_unexpected_exception_is_500_without_details(served: Served) -> None:
    with capture_logs() as events:
        status, doc = await served.request("GET", "/v1/instances/boom")
    assert (status, doc["error"]["code"]) == (500, "internal")
    assert "secret" not in json.dumps(doc)
    assert "Traceback" not in json.dumps(doc)
    # But the daemon's log has it, as one event.
    (failed,) = [e for e in events if e["event"] == "control.request_failed"]
    assert (failed["method"], failed["path"], failed["exc_info"]) == (
        "GET",
        "/v1/instances/boom",
        True,
    )


async def test_socket_and_directory_permissions(served: Served) -> None:
    assert stat.S_IMODE(served.path.stat().st_mode) == 0o600
    assert stat.S_IMODE(served.path.parent.stat().st_mode) == 0o700
    assert stat.S_ISSOCK(served.path.stat().st_mode)


async def test_socket_file_removed_on_exit(served: Served) -> None:
    await served.stop()
    assert not served.path.exists()


async def test_stale_socket_is_replaced(short_dir: Path) -> None:
    path = short_dir / "llamad.sock"
    with socket.socket(socket.AF_UNIX) as dead:
        dead.bind(str(path))  # bound, never listening, then closed: nobody answers
    with capture_logs() as events:
        server = await start_server(path, FakeController(short_dir))
    assert (await server.request("GET", "/v1/status"))[0] == 200
    await server.stop()
    replaced = [e for e in events if e["event"] == "control.socket_replaced"]
    assert replaced == [
        {"event": "control.socket_replaced", "path": str(path), "reason": replaced[0]["reason"]}
        | {"log_level": "info"}
    ]
    assert [e["event"] for e in events if e["event"] == "control.serving"] == ["control.serving"]


async def test_live_socket_is_not_taken_over(served: Served) -> None:
    with pytest.raises(SocketInUse, match=f"^another llamad is already serving {served.path}$"):
        await serve_unix(create_app(served.ctl), served.path, asyncio.Event())
    assert (await served.request("GET", "/v1/status"))[0] == 200


def test_overlong_and_non_socket_paths_are_refused(short_dir: Path) -> None:
    with pytest.raises(ValueError, match="longer than the 104-byte AF_UNIX limit"):
        bind_unix(short_dir / ("x" * 120))
    (short_dir / "file").write_text("not a socket")
    with pytest.raises(ValueError, match="is not a socket"):
        bind_unix(short_dir / "file")


async def test_curl_can_talk_to_the_socket(served: Served) -> None:
    curl = shutil.which("curl")
    if curl is None:
        pytest.skip("curl is not installed")
    argv = [curl, "-sS", "--max-time", "5", "--unix-socket", str(served.path), "http://x/v1/status"]
    proc = await asyncio.create_subprocess_exec(*argv, stdout=subprocess.PIPE)
    out, _ = await asyncio.wait_for(proc.communicate(), 10)
    assert proc.returncode == 0
    assert json.loads(out) == served.ctl.status()


async def test_fifty_concurrent_mixed_requests(served: Served) -> None:
    plan = [
        ("GET", "/v1/status", 200),
        ("GET", "/v1/instances/llama", 200),
        ("POST", "/v1/instances/qwen/restart", 200),
        ("GET", "/v1/instances/nope", 404),
        ("POST", "/v1/instances/busy/start", 409),
    ] * 10
    async with served.http() as http:
        answers = await asyncio.gather(*(http.request(m, p) for m, p, _ in plan))
    assert [r.status_code for r in answers] == [want for _, _, want in plan]
    assert all("json" in r.headers["content-type"] for r in answers)


async def test_peer_with_another_uid_is_refused(short_dir: Path) -> None:
    """We are root; a daemon that expects uid 12345 must not serve us."""
    server = await start_server(short_dir / "s.sock", FakeController(short_dir), allowed_uid=12345)
    with pytest.raises(Unreachable, match="connection closed"):
        await server.request("GET", "/v1/status")
    async with server.http() as http:
        with pytest.raises(httpx.TransportError):
            await http.get("/v1/status")
    await server.stop()


NOBODY = 65534


def python_for_nobody() -> str:
    """An interpreter uid 65534 may run (ours may sit under root's 0700 home)."""
    for candidate in ("/usr/bin/python3", "/usr/local/bin/python3", sys.executable):
        if not os.path.exists(candidate):
            continue
        argv = [candidate, "-I", "-c", "pass"]
        try:
            subprocess.run(argv, user=NOBODY, group=NOBODY, cwd="/", check=True, timeout=10)
        except (OSError, subprocess.CalledProcessError):
            continue
        return candidate
    pytest.skip("no Python interpreter that uid 65534 can run")


CHILD = """
import socket, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError as e:
    print(type(e).__name__); sys.exit()
try:
    s.settimeout(5)
    s.sendall(b"GET /v1/status HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n")
    print(s.recv(100).split(b"\\r\\n")[0].decode() or "closed")
except (BrokenPipeError, ConnectionResetError):
    print("closed")
s.close()
"""


@pytest.mark.skipif(not ROOT, reason="needs root to run a client as another uid")
async def test_other_user_is_refused_by_perms_and_by_peer_check(short_dir: Path) -> None:
    server = await start_server(short_dir / "d" / "s.sock", FakeController(short_dir))

    python = await asyncio.to_thread(python_for_nobody)

    async def as_nobody() -> str:
        argv = [python, "-I", "-c", CHILD, str(server.path)]
        proc = await asyncio.create_subprocess_exec(
            *argv, stdout=subprocess.PIPE, user=NOBODY, group=NOBODY, cwd="/"
        )
        out, _ = await asyncio.wait_for(proc.communicate(), 10)
        return out.decode().strip()

    assert await as_nobody() == "PermissionError"  # 0700 directory, 0600 socket
    # Loosen the file modes, as a careless admin might: the uid check still holds.
    for path, mode in ((short_dir, 0o755), (server.path.parent, 0o755), (server.path, 0o666)):
        await asyncio.to_thread(path.chmod, mode)
    assert await as_nobody() == "closed"
    assert (await server.request("GET", "/v1/status"))[0] == 200  # root, the daemon's uid
    await server.stop()
    # The control case: a daemon running as that user serves the very same client.
    server = await start_server(server.path, FakeController(short_dir), allowed_uid=NOBODY)
    await asyncio.to_thread(server.path.chmod, 0o666)
    assert await as_nobody() == "HTTP/1.1 200 OK"
    await server.stop()


def write_lines(path: Path, first: int, last: int, mode: str = "a") -> None:
    with path.open(mode) as fh:
        fh.writelines(f"line {i}\n" for i in range(first, last + 1))


async def test_logs_tail(served: Served) -> None:
    log = served.ctl.log_dir / "qwen.log"
    assert await served.request("GET", "/v1/instances/qwen/logs") == (200, None)  # no file yet
    write_lines(log, 1, 150)
    async with served.http() as http:
        last5 = await http.get("/v1/instances/qwen/logs", params={"lines": 5})
        default = await http.get("/v1/instances/qwen/logs")
        none = await http.get("/v1/instances/qwen/logs?lines=0")
        gone = await http.get("/v1/instances/nope/logs")
    assert last5.headers["content-type"].startswith("text/plain")
    assert last5.text == "".join(f"line {i}\n" for i in range(146, 151))
    assert default.text.splitlines() == [f"line {i}" for i in range(51, 151)]
    assert none.text == ""
    assert gone.status_code == 404


async def test_unreadable_log_is_an_error_not_an_empty_log(served: Served) -> None:
    (served.ctl.log_dir / "llama.log").mkdir()  # unreadable as a file, even for root
    status, doc = await served.request("GET", "/v1/instances/llama/logs")
    assert (status, doc["error"]["code"]) == (500, "internal")
    assert "cannot read" in doc["error"]["message"]


async def read_until(chunks: AsyncIterator[bytes], buf: bytearray, needle: bytes) -> None:
    """Read the stream until `needle` has arrived, for at most five seconds."""
    async with asyncio.timeout(5):
        while needle not in buf:
            buf += await anext(chunks)


CUT = "listener.requests_cut"  # what the listener says when its bound cuts a handler


async def test_logs_follow_appends_rotation_and_truncation(short_dir: Path) -> None:
    # The app is not told about shutdown: only noticing the disconnect can end the stream.
    served = await start_server(short_dir / "s.sock", FakeController(short_dir), False)
    log = served.ctl.log_dir / "qwen.log"
    write_lines(log, 1, 3)
    async with (
        served.http() as http,
        http.stream("GET", "/v1/instances/qwen/logs", params={"lines": 2, "follow": 1}) as resp,
    ):
        chunks, buf = resp.aiter_raw(), bytearray()
        await read_until(chunks, buf, b"line 3\n")
        assert buf == b"line 2\nline 3\n"
        write_lines(log, 4, 5)
        await read_until(chunks, buf, b"line 5\n")
        log.rename(log.with_name("qwen.log.1"))  # rotation: a new inode under the old name
        write_lines(log, 100, 101, mode="w")
        await read_until(chunks, buf, b"line 101\n")
        log.write_text("fresh\n")  # truncated in place: shorter than what we had read
        await read_until(chunks, buf, b"fresh\n")
        seen = buf.decode().splitlines()
        assert seen == ["line 2", "line 3", "line 4", "line 5", "line 100", "line 101", "fresh"]
    # The client left, so its handler has ended and shutdown need not wait out the 1 s bound.
    with capture_logs() as logs:
        await served.stop()
    assert CUT not in [e["event"] for e in logs]


@pytest.mark.parametrize("app_knows_shutdown", [True, False])
async def test_shutdown_with_a_follower_connected(
    short_dir: Path, app_knows_shutdown: bool
) -> None:
    """A follower ends the stream at shutdown; without the app's event, the 1 s bound cuts it."""
    server = await start_server(short_dir / "s.sock", FakeController(short_dir), app_knows_shutdown)
    async with (
        server.http() as http,
        http.stream("GET", "/v1/instances/qwen/logs?follow=1") as resp,
    ):
        assert resp.status_code == 200
        with capture_logs() as logs:
            await server.stop(within=5)
        cut = CUT in [e["event"] for e in logs]
        if app_knows_shutdown:
            assert await resp.aread() == b""
            assert not cut
        else:
            with pytest.raises(httpx.RemoteProtocolError):
                await resp.aread()
            assert cut
    assert not server.path.exists()


@pytest.mark.parametrize(
    ("text", "lines", "want"),
    [
        (b"", 5, b""),
        (b"a\nb\nc\n", 2, b"b\nc\n"),
        (b"a\nb\nc", 2, b"b\nc"),
        (b"a\nb\n", 10, b"a\nb\n"),
        (b"a\nb\n", 0, b""),
        (b"\n\n\n", 2, b"\n\n"),
        (b"x" * 70000 + b"\n" + b"y" * 70000 + b"\n", 1, b"y" * 70000 + b"\n"),
    ],
)
def test_tail_offset(text: bytes, lines: int, want: bytes) -> None:
    fh = io.BytesIO(text)
    assert text[tail_offset_of(fh, lines) :] == want
