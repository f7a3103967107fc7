"""Remote control on TCP: tokens, roles, rate limiting, refused token files, TLS.

Real llamad daemons with the real llama-server and the tiny model, on 127.0.0.1 only.
"""

from __future__ import annotations

import contextlib
import errno
import http.client
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from helpers import free_port, wait_for, write_config
from remote_helpers import (
    ADMIN,
    READ,
    StubController,
    TcpStub,
    fleet_config,
    llamactl,
    remote_daemon,
    scratch_dir,
    tls_files,
)
from remote_helpers import write_token as token_file

from llamad.api.auth import RateLimiter
from llamad.client.http import Client, Unreachable
from llamad.client.transport import LOCAL_NETWORK_HINT, describe_failure
from llamad.common.long_streams import LONG_STREAMS_PER_KEY

UNAUTHORIZED = {"error": {"code": "unauthorized", "message": "unauthorized"}}


@pytest.fixture
def base() -> Iterator[Path]:
    with scratch_dir() as path:
        yield path


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.timeout(60)
def test_tokens_roles_and_rate_limit(
    tiny_model: Path, capsys: pytest.CaptureFixture[str], tmp_path: Path, base: Path
) -> None:
    daemon, url = remote_daemon(base, tiny_model)
    failures = 0
    try:
        with httpx.Client(base_url=url, timeout=5) as http:
            for headers in ({}, bearer("wrong-" + ADMIN), {"Authorization": f"Basic {ADMIN}"}):
                resp = http.get("/v1/status", headers=headers)
                failures += 1
                assert (resp.status_code, resp.json()) == (401, UNAUTHORIZED)
                assert resp.headers["www-authenticate"].startswith("Bearer")
            # The read-only token reads (status, one instance, logs) but commands nothing.
            assert http.get("/v1/status", headers=bearer(READ)).status_code == 200
            assert http.get("/v1/instances/tiny", headers=bearer(READ)).status_code == 200
            assert http.get("/v1/instances/tiny/logs", headers=bearer(READ)).status_code == 200
            resp = http.post("/v1/instances/tiny/restart", headers=bearer(READ))
            assert (resp.status_code, resp.json()["error"]["code"]) == (403, "forbidden")
            assert http.post("/v1/reload", headers=bearer(READ)).status_code == 403
            # The Unix socket needs no token: its guard is the peer uid.
            assert daemon.status()["instances"][0]["state"] == "running"

            # llamactl --host with each token.
            peers = {"a": {"url": url, "token_file": token_file(tmp_path / "r.tok", READ)}}
            config = str(fleet_config(tmp_path / "ctl.toml", peers))
            code, _, err = llamactl(capsys, "--config", config, "--host", "a", "restart", "tiny")
            assert code == 1
            assert "read-only (forbidden)" in err
            admin = str(token_file(tmp_path / "a.tok", ADMIN))
            old = daemon.instance("tiny")["pid"]
            argv = ["--config", config, "--host", "a", "--token-file", admin, "restart", "tiny"]
            code, out, _ = llamactl(capsys, *argv)
            new = daemon.instance("tiny")["pid"]
            assert (code, out) == (0, f"tiny: running (pid {new})\n")
            assert new != old

            # Rate limit: after 10 failures in the window, even the admin token gets 429.
            while failures < RateLimiter().max_failures:
                assert http.get("/v1/status", headers=bearer("guess")).status_code == 401
                failures += 1
            resp = http.get("/v1/status", headers=bearer(ADMIN))
            assert resp.status_code == 429
            assert resp.json()["error"]["code"] == "rate_limited"
            assert 0 < int(resp.headers["retry-after"]) <= 60
        # The Unix socket is not behind the limit.
        assert daemon.status()["daemon"]["pid"] == daemon.proc.pid
    finally:
        assert daemon.stop() == 0


def test_rate_limiter_window() -> None:
    now = [1000.0]
    limiter = RateLimiter(max_failures=3, window_s=60, clock=lambda: now[0])
    blocked = []
    for _ in range(3):
        blocked.append(limiter.fail("1.2.3.4"))
        now[0] += 10
    assert blocked == [False, False, True]
    assert limiter.retry_after("1.2.3.4") == 30  # until the first failure (t=1000) ages out
    assert limiter.retry_after("5.6.7.8") is None  # per address
    now[0] += 30.5
    assert limiter.retry_after("1.2.3.4") is None
    assert limiter.fail("1.2.3.4")  # two still in the window, and this one: blocked again
    now[0] += 61
    assert limiter.retry_after("1.2.3.4") is None
    assert not limiter._failures  # forgotten once the window has passed


@pytest.mark.parametrize(("key", "mode"), [("token_file", 0o644), ("read_token_file", 0o640)])
def test_readable_token_file_is_refused(
    tmp_path: Path, tiny_model: Path, key: str, mode: int
) -> None:
    remote = {
        "listen": f"127.0.0.1:{free_port()}",
        "token_file": token_file(tmp_path / "admin.tok", ADMIN),
        "read_token_file": token_file(tmp_path / "read.tok", READ),
    }
    Path(remote[key]).chmod(mode)
    config = write_config(
        tmp_path / "llamad.toml",
        {"tiny": {"model": tiny_model, "port": free_port()}},
        daemon={"state_dir": tmp_path / "state", "remote": remote},
    )
    proc = subprocess.run(
        [sys.executable, "-m", "llamad", "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=30,
    )
    *lines, hint = proc.stderr.splitlines()
    assert proc.returncode == 2
    assert len(lines) == 1, lines
    assert hint.endswith(f"check it with: llamactl validate --config {config}")
    assert f"daemon.remote.{key}:" in lines[0]
    assert f"{remote[key]} is accessible by group or others (mode {mode:04o})" in lines[0]
    assert lines[0].startswith(f"llamad: {config}:")
    assert not (tmp_path / "state" / "llamad.sock").exists()  # refused before anything started


@pytest.mark.timeout(60)
def test_tls_with_a_private_ca(
    tiny_model: Path, capsys: pytest.CaptureFixture[str], base: Path
) -> None:
    cert, key, ca = tls_files(base)
    daemon, url = remote_daemon(base, tiny_model, tls=(cert, key))
    try:
        tok = str(token_file(base / "ctl.tok", ADMIN))
        peers = {
            "trusted": {"url": url, "token_file": tok, "ca_file": str(ca)},
            "untrusted": {"url": url, "token_file": tok},
        }
        config = str(fleet_config(base / "ctl.toml", peers))
        code, out, _ = llamactl(capsys, "--config", config, "--host", "trusted", "status")
        assert code == 0
        assert out.splitlines()[1].split()[:2] == ["tiny", "running"]
        code, _, err = llamactl(capsys, "--config", config, "--host", "untrusted", "status")
        assert code == 4
        assert "certificate" in err
        assert "trust its CA with ca_file" in err
        # Plain HTTP to the TLS port gets nowhere either.
        plain = url.replace("https://", "http://")
        code, _, err = llamactl(capsys, "--host", plain, "--token-file", tok, "status")
        assert code == 4
    finally:
        assert daemon.stop() == 0


def test_unreachable_host_mentions_local_network_privacy() -> None:
    reason, hint = describe_failure(OSError(errno.EHOSTUNREACH, "No route to host"), True, 2.0)
    assert (reason, hint) == ("No route to host", LOCAL_NETWORK_HINT)
    assert "Local Network" in hint

    class NoRoute(http.client.HTTPConnection):
        def connect(self) -> None:  # what macOS says when Local Network Privacy blocks us
            raise OSError(errno.EHOSTUNREACH, "No route to host")

    client = Client(url="http://192.0.2.1:7777", token="x" * 20)
    client.endpoint.connect = lambda t: NoRoute("192.0.2.1", timeout=t)
    with pytest.raises(Unreachable, match="Local Network Privacy"):
        client.call("GET", "/v1/status")


def test_remote_and_fleet_tables_are_checked(tmp_path: Path) -> None:
    """Structure errors come as one line each, with file:line and a hint for typos."""
    from llamad.config.readfile import read_partial
    from llamad.config.schema import ConfigError

    def read_file(path: Path) -> None:
        problems = read_partial(path)[2]
        if problems:
            raise ConfigError(problems)

    config = tmp_path / "llamad.toml"
    config.write_text(
        "[daemon.remote]\n"
        'listen = "7777"\n'
        'token_file = "/x"\n'
        'tls_cert = "/c"\n'
        "advertize = false\n"
        "[[fleet.peers]]\n"
        'name = "local"\n'
        'url = "studio:7777"\n'
    )
    with pytest.raises(ConfigError) as info:
        read_file(config)
    lines = info.value.lines
    assert f"{config}:5: daemon.remote: unknown key 'advertize' (did you mean advertise?)" in lines
    assert any("daemon.remote.listen: must be HOST:PORT" in line for line in lines)
    assert any("fleet.peers[0].url: must start with http:// or https://" in line for line in lines)
    for text, message in (
        (
            '[daemon.remote]\nlisten = "127.0.0.1:1"\ntoken_file = "/x"\ntls_key = "/k"\n',
            "go together",
        ),
        ('[[fleet.peers]]\nname = "local"\nurl = "http://x:1"\n', "'local' is taken"),
        ('[daemon.remote]\nlisten = "::1:7777"\ntoken_file = "/x"\n', "in brackets"),
    ):
        config.write_text(text)
        with pytest.raises(ConfigError, match=message):
            read_file(config)


def test_host_does_not_apply_to_local_commands(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("validate", "fleet"):
        code, _, err = llamactl(capsys, "--host", "http://127.0.0.1:1", command)
        assert code == 2
        assert "--host does not apply" in err


def test_garbage_on_the_tcp_port_logs_one_line(base: Path, tiny_model: Path) -> None:
    """Thirty requests of noise: one warning in the daemon's log, not thirty."""
    daemon, url = remote_daemon(base, tiny_model)
    port = int(url.rsplit(":", 1)[1])
    with daemon:
        for _ in range(30):
            with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
                sock.sendall(b"\x16\x03\x01 garbage that is not HTTP\r\n\r\n")
                sock.settimeout(5)
                with contextlib.suppress(OSError):
                    sock.recv(1024)  # the daemon answers 400 or closes
        # A real request still works afterwards.
        assert httpx.get(f"{url}/v1/status", headers=bearer(ADMIN), timeout=5).status_code == 200
        assert daemon.stop() == 0
    noise = [e for e in daemon.events() if "Invalid HTTP request" in str(e.get("message"))]
    assert len(noise) == 1, noise


class _Logged(StubController):
    """The stub, with a log file for `stub`."""

    def __init__(self, log: Path) -> None:
        super().__init__("1", "b1")
        self.log = log

    def log_file(self, name: str) -> Path:
        return self.log


@pytest.mark.timeout(60)
def test_the_read_token_holds_a_bounded_number_of_log_follows(base: Path) -> None:
    """`llamactl logs -f` with the read token (a limited key): at most
    LONG_STREAMS_PER_KEY at once, the next a 429; the admin token is the operator's."""
    log = base / "stub.log"
    log.write_text("a line\n")
    stub = TcpStub(_Logged(log))
    url = f"{stub.url}/v1/instances/stub/logs?follow=1"
    with contextlib.ExitStack() as held:
        client = held.enter_context(httpx.Client(timeout=10))
        for _ in range(LONG_STREAMS_PER_KEY):
            follow = held.enter_context(client.stream("GET", url, headers=bearer(READ)))
            assert follow.status_code == 200
        refused = client.get(url, headers=bearer(READ))
        assert refused.status_code == 429
        assert refused.json()["error"]["code"] == "too_many_streams"
        once = client.get(f"{stub.url}/v1/instances/stub/logs", headers=bearer(READ))
        assert once.status_code == 200  # a tail that ends is no long-lived stream
        with client.stream("GET", url, headers=bearer(ADMIN)) as mine:
            assert mine.status_code == 200

    def follows() -> bool:
        with httpx.Client(timeout=10) as again, again.stream("GET", url, headers=bearer(READ)) as f:
            return f.status_code == 200

    wait_for(follows, 10, "the ended follows giving their places back")
    stub.stop()
