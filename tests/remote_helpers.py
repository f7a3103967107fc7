"""Helpers for remote-control and fleet tests: token files, daemons on loopback TCP,
a self-signed certificate, a fake controller served on TCP, llamactl in-process, and
whether multicast works on loopback here (mDNS tests)."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme
from helpers import Llamad, free_port, short_dir, toml_value, write_config
from stand_ins import ServerThread

from llamad.api.app import create_app
from llamad.api.auth import BearerAuth
from llamad.api.errors import UnknownInstance
from llamad.cli.main import run
from llamad.listener.tcp import serve_tcp

PROBE_GROUP = "239.255.42.99"  # organisation-local scope, not mDNS's own group
ADMIN = "admin-token-" + "a" * 24
READ = "read-token-" + "b" * 24


@contextlib.contextmanager
def scratch_dir() -> Iterator[Path]:
    """A short directory under /tmp (AF_UNIX paths are short), removed afterwards."""
    path = short_dir()
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def write_token(path: Path, token: str, mode: int = 0o600) -> Path:
    """A token file with exactly `mode` (the umask does not get a say)."""
    path.write_text(token + "\n")
    path.chmod(mode)
    return path


def remote_daemon(
    base: Path, model: Path, *, advertise: bool = False, tls: tuple[Path, Path] | None = None
) -> tuple[Llamad, str]:
    """A started llamad with one tiny instance and remote control on 127.0.0.1; its URL."""
    base.mkdir(parents=True, exist_ok=True)
    port = free_port()
    remote: dict[str, Any] = {
        "listen": f"127.0.0.1:{port}",
        "token_file": write_token(base / "admin.token", ADMIN),
        "read_token_file": write_token(base / "read.token", READ),
        "advertise": advertise,
    }
    if tls is not None:
        remote["tls_cert"], remote["tls_key"] = tls
    config = write_config(
        base / "llamad.toml",
        {"tiny": {"model": model, "port": free_port()}},
        daemon={"state_dir": base / "state", "remote": remote},
    )
    daemon = Llamad(config)
    try:
        daemon.wait_ready()
        daemon.wait_event("remote.listening", timeout=10)
        daemon.wait_running("tiny", timeout=20)
    except BaseException:
        daemon.close()
        raise
    return daemon, f"{'https' if tls else 'http'}://127.0.0.1:{port}"


def llamactl(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """llamactl in-process: (exit code, stdout, stderr)."""
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def tls_files(base: Path) -> tuple[Path, Path, Path]:
    """A server certificate for 127.0.0.1 and localhost, its key, and the test CA that
    signed it (what a peer's `ca_file` names), made by trustme."""
    ca = trustme.CA()
    server = ca.issue_cert("127.0.0.1", "localhost")
    cert, key, ca_file = base / "tls.crt", base / "tls.key", base / "ca.crt"
    server.cert_chain_pems[0].write_to_path(str(cert))
    server.private_key_pem.write_to_path(str(key))
    ca.cert_pem.write_to_path(str(ca_file))
    key.chmod(0o600)
    return cert, key, ca_file


class StubController:
    """A daemon that reports fixed versions and one instance; restart bumps the pid."""

    def __init__(self, version: str, llama: str, state: str = "running") -> None:
        self.version, self.llama, self.pid = version, llama, 100
        self.inst = {"name": "stub", "state": state, "pid": self.pid, "port": 9999}

    def status(self) -> dict[str, Any]:
        daemon = {"pid": 1, "version": self.version, "llama_server_version": self.llama}
        return {"daemon": daemon | {"started_at": self.llama}, "instances": [dict(self.inst)]}

    def instance(self, name: str) -> dict[str, Any]:
        if name != "stub":
            raise UnknownInstance(name)
        return dict(self.inst)

    async def start(self, name: str, wait: float | None = None) -> dict[str, Any]:
        return self.instance(name)

    stop = start

    async def restart(self, name: str, wait: float | None = None) -> dict[str, Any]:
        self.pid += 1
        self.inst.update(pid=self.pid, state="running")
        return self.instance(name)

    async def reload(self) -> dict[str, Any]:
        return {"added": [], "changed": [], "removed": []}

    def log_file(self, name: str) -> Path:
        raise UnknownInstance(name)

    async def metrics(self) -> bytes:
        return b""


class TcpStub(ServerThread):
    """A StubController behind BearerAuth on 127.0.0.1, in a thread with its own loop."""

    def __init__(self, ctl: StubController) -> None:
        self.ctl, self.port = ctl, free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        super().__init__("the stub")

    async def serve(self, shutdown: asyncio.Event) -> None:
        app = BearerAuth(create_app(self.ctl), ADMIN, READ)
        await serve_tcp(app, "127.0.0.1", self.port, shutdown, self.bound.set)


def fleet_config(path: Path, peers: dict[str, dict[str, Any]], **fleet: Any) -> Path:
    """A llamactl config: `[fleet]` keys, then a `[[fleet.peers]]` per name -> its keys."""
    lines = ["[fleet]"] + [f"{k} = {toml_value(v)}" for k, v in fleet.items()]
    for name, keys in peers.items():
        lines += ["[[fleet.peers]]", f"name = {toml_value(name)}"]
        lines += [f"{k} = {toml_value(v)}" for k, v in keys.items()]
    path.write_text("\n".join(lines) + "\n")
    return path


def loopback_multicast_works() -> str | None:
    """None when a datagram sent to a group on 127.0.0.1 comes back; else why not."""
    group = socket.inet_aton(PROBE_GROUP)
    with contextlib.ExitStack() as stack:
        rx = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        tx = stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_DGRAM))
        try:
            rx.bind((PROBE_GROUP, 0))  # only what is sent to the group; no host address
            rx.setsockopt(
                socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, group + socket.inet_aton("127.0.0.1")
            )
            rx.settimeout(1.0)
            tx.bind(("127.0.0.1", 0))
            tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
            tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
            tx.sendto(b"llamad-probe", (PROBE_GROUP, rx.getsockname()[1]))
            data, _ = rx.recvfrom(64)
        except OSError as exc:
            return f"multicast on loopback does not work here ({exc})"
    return None if data == b"llamad-probe" else "multicast on loopback delivered something else"
