"""llamactl against a real control server (fake controller) running in a background thread."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import import_probe
from stand_ins import ServerThread

from llamad.api.app import create_app, serve_unix
from llamad.api.errors import InvalidConfig, UnknownInstance
from llamad.cli import cells, table
from llamad.cli.main import run
from llamad.cli.parser import build_parser
from llamad.client.http import find_socket
from llamad.config import load as spec

HEAVY = ("httpx", "pydantic", "pydantic_settings", "starlette", "structlog", "psutil", "httptools")
SETTLE_S = 0.1  # how long the fake takes to carry out a command


def inst(name: str, state: str, pid: int | None = None, **extra: Any) -> dict[str, Any]:
    doc = {
        "name": name,
        "state": state,
        "pid": pid,
        "host": "127.0.0.1",
        "port": 8089,
        "model": f"/models/{name}.Q4.gguf",
        "restarts": 0,
        "uptime_s": None,
        "health": None,
        "last_exit": None,
        "error": None,
        "rss_bytes": None,
        "cpu_percent": None,
    }
    return doc | extra


class FakeController:
    """Commands change state after SETTLE_S, on the server's loop, like the real supervisor.

    `crashy` fails when started; `stuck` never leaves starting.
    """

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.next_pid = 5000
        self.reload_report: dict[str, Any] = {"added": [], "changed": [], "removed": []}
        self.reload_error: str | None = None
        health = {"ok": True, "status": 200, "latency_ms": 1.23, "checked_at": "now"}
        self.docs = {
            "qwen": inst(
                "qwen", "running", 4567, uptime_s=192, rss_bytes=612 * 2**20, health=health
            ),
            "idle": inst("idle", "stopped"),
            "crashy": inst("crashy", "stopped"),
            "stuck": inst("stuck", "stopped"),
        }
        self.config_error: str | None = None
        self.changed = asyncio.Event()

    def status(self) -> dict[str, Any]:
        daemon = {
            "pid": 123,
            "version": "0.1.0",
            "config_path": "/abs/llamad.toml",
            "config_error": self.config_error,
            "llama_server_version": "version: 4321 (abcdef)",
        }
        return {"daemon": daemon, "instances": [dict(d) for d in self.docs.values()]}

    def instance(self, name: str) -> dict[str, Any]:
        if name not in self.docs:
            raise UnknownInstance(name)
        return dict(self.docs[name])

    def _later(self, name: str, **changes: Any) -> None:
        def apply() -> None:
            self.docs[name].update(changes)
            self.changed.set()
            self.changed = asyncio.Event()

        asyncio.get_running_loop().call_later(SETTLE_S, apply)

    async def _outcome(self, name: str, wait: float | None, *states: str) -> dict[str, Any]:
        # As llamad does: hold the answer until the instance is in one of `states`.
        if wait:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    while self.docs[name]["state"] not in states:
                        await self.changed.wait()
        return self.instance(name)

    async def start(self, name: str, wait: float | None = None) -> dict[str, Any]:
        doc = self.instance(name)
        if doc["state"] != "running" and name != "stuck":
            self.docs[name].update(state="starting")
            if name == "crashy":
                self._later(name, state="failed", error="exited with code 1: bad magic")
            else:
                self.next_pid += 1
                self._later(name, state="running", pid=self.next_pid)
        return await self._outcome(name, wait, "running", "failed")

    async def stop(self, name: str, wait: float | None = None) -> dict[str, Any]:
        self.instance(name)
        self._later(name, state="stopped", pid=None)
        return await self._outcome(name, wait, "stopped", "failed")

    async def restart(self, name: str, wait: float | None = None) -> dict[str, Any]:
        self.instance(name)
        self.docs[name].update(state="stopping")
        self.next_pid += 1
        self._later(name, state="running", pid=self.next_pid)
        return await self._outcome(name, wait, "running", "failed")

    async def reload(self) -> dict[str, Any]:
        if self.reload_error:
            raise InvalidConfig(self.reload_error)
        return self.reload_report

    def log_file(self, name: str) -> Path:
        self.instance(name)
        return self.log_dir / f"{name}.log"


class Daemon(ServerThread):
    """serve_unix on its own loop in a thread, as the CLI meets it in real life."""

    def __init__(self, path: Path, ctl: FakeController) -> None:
        self.path, self.ctl = path, ctl
        super().__init__("the control server")

    async def serve(self, shutdown: asyncio.Event) -> None:
        app = create_app(self.ctl, shutdown=shutdown)
        await serve_unix(app, self.path, shutdown, on_bound=self.bound.set)


@pytest.fixture
def short_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(dir="/tmp", prefix="llamactl-t"))
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Daemon]:
    for var in ("LLAMAD_SOCKET", "LLAMAD_CONFIG", "NO_COLOR"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(short_dir / "config"))
    monkeypatch.setenv("XDG_STATE_HOME", str(short_dir / "state"))
    d = Daemon(short_dir / "llamad.sock", FakeController(short_dir))
    yield d
    d.stop()


Ctl = Callable[..., tuple[int, str, str]]


@pytest.fixture
def ctl(daemon: Daemon, capsys: pytest.CaptureFixture[str]) -> Ctl:
    """Run llamactl in-process against the daemon: (exit code, stdout, stderr)."""

    def call(*argv: str) -> tuple[int, str, str]:
        code = run(["--socket", str(daemon.path), *argv])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def test_status_table(daemon: Daemon, ctl: Ctl) -> None:
    daemon.ctl.docs["crashy"].update(state="failed", error="port 8089 in use by pid 4242 (python3)")
    daemon.ctl.config_error = "llamad.toml:7: instances.x.port: not a number"
    code, out, err = ctl("status")
    lines = out.splitlines()
    assert lines[0].split() == list(table.COLUMNS)
    qwen = "qwen running 4567 8089 qwen.Q4.gguf 3m12s 0 ok 1.2ms 612M"
    idle = "idle stopped - 8089 idle.Q4.gguf - 0 - -"
    assert [lines[1].split(), lines[2].split()] == [qwen.split(), idle.split()]
    assert lines[0].index("STATE") == lines[2].index("stopped")  # columns line up
    assert "warning: config not applied: llamad.toml:7: instances.x.port: not a number" in lines
    assert "crashy: port 8089 in use by pid 4242 (python3)" in lines
    assert "\x1b[" not in out  # not a terminal
    assert (code, err) == (3, "")


def test_status_json_is_the_document(daemon: Daemon, ctl: Ctl) -> None:
    code, out, _ = ctl("status", "--json")
    assert json.loads(out) == daemon.ctl.status()
    assert code == 3
    code, out, _ = ctl("status", "qwen", "--json")
    assert json.loads(out) == {**daemon.ctl.status(), "instances": [daemon.ctl.instance("qwen")]}
    assert code == 0  # every selected instance is running


def test_status_unknown_name_is_an_error(ctl: Ctl) -> None:
    code, out, err = ctl("status", "qwen", "nope")
    assert (code, out, err) == (6, "", "llamactl: no instance named 'nope'\n")


def test_unreachable_names_the_socket(short_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = short_dir / "gone.sock"
    assert run(["status", "--socket", str(missing)]) == 4
    err = capsys.readouterr().err
    reason = "(No such file or directory); is it running?"
    assert err == f"llamactl: cannot reach llamad at {missing} {reason}\n"


def test_start_waits_until_running(daemon: Daemon, ctl: Ctl) -> None:
    code, out, _ = ctl("start", "idle")
    assert (code, out) == (0, f"idle: running (pid {daemon.ctl.docs['idle']['pid']})\n")


def test_start_reports_failure_and_timeout(ctl: Ctl) -> None:
    code, out, _ = ctl("start", "crashy")
    assert (code, out) == (1, "crashy: failed: exited with code 1: bad magic\n")
    code, out, _ = ctl("start", "stuck", "--timeout", "0.3")
    assert (code, out) == (1, "stuck: timed out in state stopped\n")


def test_stop_and_restart_wait(daemon: Daemon, ctl: Ctl) -> None:
    assert ctl("stop", "qwen") == (0, "qwen: stopped\n", "")
    ctl("start", "qwen")
    before = daemon.ctl.docs["qwen"]["pid"]
    code, out, _ = ctl("restart", "qwen")
    after = daemon.ctl.docs["qwen"]["pid"]
    assert (code, out) == (0, f"qwen: running (pid {after})\n")
    assert after != before


def test_no_wait_and_all(daemon: Daemon, ctl: Ctl) -> None:
    code, out, _ = ctl("start", "idle", "--no-wait")
    assert (code, out) == (0, "idle: start requested (now starting)\n")
    code, out, _ = ctl("stop", "--all")
    assert code == 0
    assert sorted(out.splitlines()) == sorted(f"{n}: stopped" for n in daemon.ctl.docs)
    assert ctl("start")[0] == 2  # neither names nor --all


def test_unknown_instance_command(ctl: Ctl) -> None:
    """An unknown name has its own code, 6, for actions and status alike; failure wins."""
    assert ctl("start", "nope") == (6, "", "llamactl: no instance named 'nope'\n")
    assert ctl("logs", "nope")[0] == 6
    code, out, _ = ctl("start", "nope", "crashy")
    assert (code, out) == (1, "crashy: failed: exited with code 1: bad magic\n")


@pytest.mark.parametrize(
    ("argv", "code"),
    [(["status"], 4), (["start", "a"], 7), (["reload"], 7), (["logs", "a"], 7)],
)
def test_unreachable_llamad_by_command_kind(
    short_dir: Path, argv: list[str], code: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LSB: a status command cannot know (4); an action finds llamad not running (7)."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(short_dir / "config"))
    monkeypatch.delenv("LLAMAD_CONFIG", raising=False)
    assert run([*argv, "--socket", str(short_dir / "gone.sock")]) == code


def test_help_epilog_lists_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["--help"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    for phrase in ("3 some instance not running", "4 llamad unreachable", "7 llamad not running"):
        assert phrase in out
    assert "6 no instance of that name" in out


def test_reload_output_and_invalid_config(daemon: Daemon, ctl: Ctl) -> None:
    assert ctl("reload") == (0, "no changes\n", "")
    daemon.ctl.reload_report = {
        "added": ["a", "b"],
        "changed": ["c"],
        "removed": [],
        "unchanged": ["q"],
    }
    assert ctl("reload") == (0, "added: a, b\nchanged: c\nunchanged: q\n", "")
    daemon.ctl.reload_report = {"added": ["b"], "removed": ["a"], "draining": ["a"]}
    assert ctl("reload") == (0, "added: b\nremoved: a\ndraining: a\n", "")
    daemon.ctl.reload_error = "/abs/llamad.toml:4: instances.a.model: file not found"
    assert ctl("reload") == (2, "", daemon.ctl.reload_error + "\n")


def test_logs_tail(daemon: Daemon, ctl: Ctl) -> None:
    (daemon.ctl.log_dir / "qwen.log").write_text("".join(f"l{i}\n" for i in range(10)))
    assert ctl("logs", "qwen", "-n", "3") == (0, "l7\nl8\nl9\n", "")
    assert ctl("logs", "nope")[0] == 6  # no such instance


def llamactl(*argv: str, **kw: Any) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "llamad.cli.main", *argv]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kw)


def test_logs_follow_until_ctrl_c(daemon: Daemon) -> None:
    log = daemon.ctl.log_dir / "qwen.log"
    log.write_text("first\n")
    proc = llamactl("logs", "qwen", "-f", "--socket", str(daemon.path))
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline() == b"first\n"
        with log.open("a") as fh:
            fh.write("second\n")
        assert proc.stdout.readline() == b"second\n"
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
        proc.communicate()
    assert (proc.returncode, err) == (0, b"")


def test_validate(short_dir: Path, ctl: Ctl, monkeypatch: pytest.MonkeyPatch) -> None:
    config = short_dir / "llamad.toml"
    config.write_text("")
    problems: dict[Path, list[str]] = {}
    monkeypatch.setattr(spec, "check", lambda path, warnings=None: problems.get(path, []))
    assert ctl("validate", "--config", str(config)) == (0, f"{config}: ok\n", "")
    problems[config] = [f"{config}:1: a", f"{config}:2: b"]
    assert ctl("validate", "--config", str(config)) == (2, "", f"{config}:1: a\n{config}:2: b\n")
    code, _, err = ctl("validate", "--config", str(short_dir / "none.toml"))
    assert (code, err) == (2, f"llamactl: {short_dir / 'none.toml'}: no such file\n")


def test_validate_help_lists_only_config(capsys: pytest.CaptureFixture[str]) -> None:
    """validate talks to no llamad: its help offers --config and nothing of the connection."""
    assert run(["validate", "--help"]) == 0
    out = capsys.readouterr().out
    assert "--config FILE" in out
    for option in ("--socket", "--host", "--token-file", "--ca-file"):
        assert option not in out


def test_validate_with_the_real_checker(short_dir: Path, ctl: Ctl) -> None:
    config = short_dir / "bad.toml"
    config.write_text("[daemon]\nno_such_key = 1\n")
    code, out, err = ctl("validate", "--config", str(config))
    assert (code, out) == (2, "")
    assert err.startswith(f"{config}:2: ")


def test_version(short_dir: Path, ctl: Ctl, capsys: pytest.CaptureFixture[str]) -> None:
    both = "llamactl 0.1.0\nllamad 0.1.0 (pid 123), llama-server 4321 (abcdef)\n"
    assert ctl("version") == (0, both, "")
    assert ctl("--version") == (0, both, "")
    assert run(["version", "--socket", str(short_dir / "none.sock")]) == 0
    assert capsys.readouterr().out == "llamactl 0.1.0\n"


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["status"],
        ["start"],
        ["stop"],
        ["restart"],
        ["reload"],
        ["logs"],
        ["validate"],
        ["version"],
    ],
)
def test_help(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run([*argv, "--help"]) == 0
    assert "usage: llamactl" in capsys.readouterr().out


def test_bad_usage_is_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert run(["status", "--bogus"]) == 2
    assert run(["frobnicate"]) == 2


def test_service_is_loaded_only_when_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []
    fake = types.ModuleType("llamad.service.install")

    def handle(args: Any) -> int:
        seen.append(args.what)
        return 7

    def register(sub: Any, parents: list[Any]) -> None:
        p = sub.add_parser("service", parents=parents)
        p.add_argument("what")
        p.set_defaults(func=handle)

    fake.register = register  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "llamad.service.install", fake)
    assert run(["service", "install"]) == 7
    assert seen == ["install"]


def test_socket_discovery_order(short_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("LLAMAD_SOCKET", "LLAMAD_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(short_dir / "cfg"))
    monkeypatch.setenv("XDG_STATE_HOME", str(short_dir / "state"))
    config = short_dir / "llamad.toml"
    config.write_text('[daemon]\nsocket = "~/from-config.sock"\n')
    default = short_dir / "state" / "llamad" / "llamad.sock"
    assert find_socket(None, None) == default
    assert find_socket(None, str(config)) == Path.home() / "from-config.sock"
    monkeypatch.setenv("LLAMAD_SOCKET", "/tmp/from-env.sock")
    assert find_socket(None, str(config)) == Path("/tmp/from-env.sock")
    assert find_socket("/tmp/flag.sock", str(config)) == Path("/tmp/flag.sock")
    monkeypatch.delenv("LLAMAD_SOCKET")
    (short_dir / "cfg" / "llamad").mkdir(parents=True)
    (short_dir / "cfg" / "llamad" / "llamad.toml").write_text('[daemon]\nstate_dir = "/tmp/sd"\n')
    assert find_socket(None, None) == Path("/tmp/sd/llamad.sock")  # the default config counts


def test_config_file_leads_to_the_daemon(
    daemon: Daemon, short_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = short_dir / "llamad.toml"
    config.write_text(f'[daemon]\nsocket = "{daemon.path}"\n')
    assert run(["--config", str(config), "status", "qwen"]) == 0
    assert run(["status", "--config", str(short_dir / "missing.toml")]) == 2
    assert "cannot read" in capsys.readouterr().err


def test_status_imports_no_heavy_modules(daemon: Daemon) -> None:
    out = import_probe(["status", "--json", "--socket", str(daemon.path)], HEAVY)
    assert json.loads(out.stdout.splitlines()[-1]) == [3, []]
    imports = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "llamad.cli.main", "--help"],
        capture_output=True,
        check=True,
        timeout=30,
    ).stderr.decode()
    loaded = {line.rsplit("|", 1)[-1].strip().split(".")[0] for line in imports.splitlines()}
    assert not loaded & set(HEAVY)
    assert "llamad.service.install" not in imports


def test_table_units_and_colour(monkeypatch: pytest.MonkeyPatch) -> None:
    assert [cells.duration(s) for s in (None, 5, 192, 7500, 90000)] == [
        "-",
        "5s",
        "3m12s",
        "2h05m",
        "1d01h",
    ]
    assert [cells.size(n) for n in (None, 512, 839680, 612 * 2**20, int(1.2 * 2**30))] == [
        "-",
        "512B",
        "820K",
        "612M",
        "1.2G",
    ]
    assert table.health({"ok": False, "status": 503}) == "503"
    assert table.health({"ok": False, "status": None}) == "down"
    doc = {"daemon": {}, "instances": [inst("a", "running", 1), inst("b", "backoff")]}
    coloured = table.render(doc, colour=True)
    assert "\x1b[32mrunning" in coloured
    assert "\x1b[31mbackoff" in coloured

    class Tty:
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    assert table.use_colour(Tty())  # type: ignore[arg-type]
    monkeypatch.setenv("NO_COLOR", "1")
    assert not table.use_colour(Tty())  # type: ignore[arg-type]


def test_problem_line_from_last_exit() -> None:
    last = {"code": None, "signal": "SIGKILL", "at": "t", "stderr_tail": ["loading", "oom", ""]}
    assert table.problem(inst("a", "backoff", last_exit=last)) == "killed by SIGKILL: oom"


def test_force_colour_colours_a_pipe_and_no_colour_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    """FORCE_COLOR colours llamactl's table even into a pipe; NO_COLOR beats it."""
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.setenv("FORCE_COLOR", "1")
    assert table.use_colour(io.StringIO())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not table.use_colour(io.StringIO())


# Every command path, with what it needs besides the global options.
COMMAND_PATHS = [
    ["status"],
    ["start", "a"],
    ["stop", "a"],
    ["restart", "a"],
    ["reload"],
    ["logs", "a"],
    ["validate"],
    ["version"],
    ["fleet"],
    ["fleet", "status"],
    ["service", "install"],
    ["service", "uninstall"],
    ["service", "status"],
    ["service", "restart"],
]


@pytest.mark.parametrize("path", COMMAND_PATHS, ids=" ".join)
@pytest.mark.parametrize("where", ["before", "after"])
def test_global_options_before_or_after_every_command(path: list[str], where: str) -> None:
    """`--config`, `--socket`, `--host`, `--token-file`, `--ca-file` go on either side."""
    options = ["--config", "c.toml", "--socket", "s.sock", "--host", "h"]
    options += ["--token-file", "t", "--ca-file", "ca.pem"]
    argv = [*options, *path] if where == "before" else [*path, *options]
    args = build_parser(service=True).parse_args(argv)
    assert (args.config, args.socket, args.host) == ("c.toml", "s.sock", "h")
    assert (args.token_file, args.ca_file) == ("t", "ca.pem")
