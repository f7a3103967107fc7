"""llamad.systemd: the unit we render and the exact systemctl calls, via `llamactl service`.

systemd is not running here, so a recording stand-in `systemctl` goes first on PATH: it
appends its argv to a log and answers with the exit code, stdout and stderr of the longest
matching rule.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
from stand_ins import Fakes, install_fakes, service_llamactl

from llamad.service import install as service
from llamad.service import systemd

UNIT = "llamad.service"
NO_BUS = "Failed to connect to bus: No medium found"


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    return home


@pytest.fixture
def fakes(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Fakes:
    return install_fakes(tmp_path, monkeypatch, "systemctl", "llamad")


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "llamad.toml"
    path.write_text("[supervise]\nstop_timeout = 7\n")
    return path


@pytest.fixture
def unit_file(tmp_path: Path) -> Path:
    return tmp_path / "xdg" / "systemd" / "user" / UNIT


def llamactl(*argv: str) -> int:
    return service_llamactl("systemd", *argv)


def parse_unit(text: str) -> dict[str, list[tuple[str, str]]]:
    """Sections of a unit file as (key, value) lists; comments and blanks dropped."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if line.startswith("["):
            current = sections.setdefault(line.strip("[]"), [])
        else:
            key, _, value = line.partition("=")
            current.append((key, value))
    return sections


def test_print_renders_the_unit(
    fakes: Fakes,
    tmp_path: Path,
    config: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--print: notify type, watchdog, bounded restarts, stop timeout over the budget."""
    for var in ("XDG_CACHE_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME"):  # conftest's
        monkeypatch.delenv(var, raising=False)
    assert llamactl("install", "--print", "--config", str(config)) == 0
    bin_dir = tmp_path / "bin"
    path = f"{bin_dir}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
    assert parse_unit(capsys.readouterr().out) == {
        "Unit": [
            ("Description", "llamad: keep local llama.cpp servers always on"),
            ("StartLimitIntervalSec", "300"),
            ("StartLimitBurst", "5"),
        ],
        "Service": [
            ("Type", "notify"),
            ("NotifyAccess", "main"),
            ("ExecStart", f"{bin_dir / 'llamad'} --config {config}"),
            ("ExecReload", "kill -HUP $MAINPID"),
            ("WorkingDirectory", str(config.parent)),
            ("Environment", f"PATH={path}"),
            ("Environment", f"LLAMAD_CONFIG={config}"),
            ("Environment", f"XDG_CONFIG_HOME={tmp_path / 'xdg'}"),  # the fixture's
            ("Restart", "on-failure"),
            ("RestartPreventExitStatus", "2"),
            ("RestartSec", "2"),
            ("OOMPolicy", "continue"),
            ("KillMode", "mixed"),
            # stop budget = 7 + 5 = 12; TimeoutStopSec = ceil(12) + 5
            ("TimeoutStopSec", "17"),
            ("WatchdogSec", "30"),
            ("NoNewPrivileges", "yes"),
            ("LockPersonality", "yes"),
            ("RestrictRealtime", "yes"),
            ("RestrictSUIDSGID", "yes"),
            ("SystemCallArchitectures", "native"),
            ("PrivateTmp", "yes"),
            ("UMask", "0077"),
        ],
        "Install": [("WantedBy", "default.target")],
    }
    assert fakes.calls() == []


@pytest.mark.skipif(shutil.which("systemd-analyze") is None, reason="systemd is not installed")
def test_systemd_analyze_verify_is_clean(
    fakes: Fakes, tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The rendered unit passes `systemd-analyze --user verify` without a word."""
    assert llamactl("install", "--print", "--config", str(config)) == 0
    unit = tmp_path / UNIT
    unit.write_text(capsys.readouterr().out)
    (tmp_path / "bin" / "llamad").chmod(0o755)  # ExecStart must name an executable
    runtime = tmp_path / "runtime"  # the user manager it simulates needs one
    runtime.mkdir(mode=0o700)
    verify = subprocess.run(
        ["systemd-analyze", "--user", "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, "XDG_RUNTIME_DIR": str(runtime)},
    )
    said = [ln for ln in (verify.stdout + verify.stderr).splitlines() if ln.strip()]
    assert (verify.returncode, said) == (0, [])


def test_install_carries_the_variables_the_config_depends_on(
    fakes: Fakes,
    home: Path,
    config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """systemd's user manager passes a unit only its own environment: where models and
    caches are found is carried into the unit, secrets are not, and what cannot be carried
    is named."""
    monkeypatch.setenv("HF_HOME", "/data/my hf")
    monkeypatch.setenv("OLLAMA_MODELS", "~/ollama")
    monkeypatch.setenv("XDG_CACHE_HOME", "cache")  # relative: meaningless in another cwd
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    assert llamactl("install", "--print", "--config", str(config)) == 0
    out, err = capsys.readouterr()
    env = [value for key, value in parse_unit(out)["Service"] if key == "Environment"]
    assert '"HF_HOME=/data/my hf"' in env
    assert f"OLLAMA_MODELS={home / 'ollama'}" in env
    assert not any("XDG_CACHE_HOME" in v or "HF_TOKEN" in v for v in env)
    assert "hf_secret_value" not in out
    assert err == (
        "llamactl service: warning: XDG_CACHE_HOME=cache is not an absolute path, so the "
        "service does not get it (it starts in another directory); set it to an absolute "
        "path and install again\n"
    )


def test_unit_quotes_spaces_specifiers_and_dollars(
    fakes: Fakes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config path with a space, % and $ survives systemd's parsing of ExecStart."""
    config = tmp_path / 'my "models" 100%$HOME.toml'
    assert llamactl("install", "--print", "--config", str(config)) == 0
    service_section = dict(parse_unit(capsys.readouterr().out)["Service"])
    escaped = str(config).replace("%", "%%").replace("$", "$$").replace('"', '\\"')
    assert service_section["ExecStart"].endswith(f' --config "{escaped}"')


@pytest.mark.parametrize(
    ("value", "exec_arg", "expected"),
    [
        ("/usr/bin/llamad", True, "/usr/bin/llamad"),
        ("/a b/c", True, '"/a b/c"'),
        ("/a%b$c", True, "/a%%b$$c"),
        ("PATH=/a%b$c", False, "PATH=/a%%b$c"),
        ('back\\slash"quote', False, '"back\\\\slash\\"quote"'),
        ("", True, '""'),
    ],
)
def test_quote(value: str, exec_arg: bool, expected: str) -> None:
    assert systemd.quote(value, exec_arg=exec_arg) == expected


def test_quote_refuses_line_breaks() -> None:
    with pytest.raises(service.ServiceError, match="line break"):
        systemd.quote("/a\nb")


def test_fresh_install_reloads_then_enables_now(
    fakes: Fakes, config: Path, unit_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """daemon-reload, then enable --now; the unit is 0644 and linger is mentioned."""
    assert llamactl("install", "--config", str(config)) == 0
    assert fakes.calls() == [
        ["systemctl", "--user", "daemon-reload"],
        ["systemctl", "--user", "enable", "--now", UNIT],
    ]
    assert stat.S_IMODE(unit_file.stat().st_mode) == 0o644
    assert "Type=notify" in unit_file.read_text()
    out = capsys.readouterr().out
    assert f"wrote {unit_file}" in out
    assert "loginctl enable-linger" in out


def test_unit_goes_to_dot_config_without_xdg(
    fakes: Fakes, home: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """XDG_CONFIG_HOME unset: ~/.config/systemd/user."""
    monkeypatch.delenv("XDG_CONFIG_HOME")
    assert llamactl("install", "--config", str(config)) == 0
    assert (home / ".config" / "systemd" / "user" / UNIT).is_file()


def test_reinstall_restarts_to_pick_up_the_new_unit(
    fakes: Fakes, config: Path, unit_file: Path
) -> None:
    """enable --now would leave a running llamad on the old unit, so reinstall restarts."""
    unit_file.parent.mkdir(parents=True)
    unit_file.write_text("old")
    assert llamactl("install", "--config", str(config)) == 0
    assert fakes.calls() == [
        ["systemctl", "--user", "daemon-reload"],
        ["systemctl", "--user", "enable", UNIT],
        ["systemctl", "--user", "restart", UNIT],
    ]
    assert "ExecStart=" in unit_file.read_text()


def test_enable_failure_is_one_line_with_exit_code(
    fakes: Fakes, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes.rule("systemctl --user enable", 1, stderr=NO_BUS + "\n")
    assert llamactl("install", "--config", str(config)) == 1
    assert capsys.readouterr().err == (
        f"llamactl service: systemctl --user enable --now {UNIT} failed (exit 1): {NO_BUS}\n"
    )


def test_daemon_reload_failure_stops_before_enable(
    fakes: Fakes, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes.rule("systemctl --user daemon-reload", 1, stderr=NO_BUS)
    assert llamactl("install", "--config", str(config)) == 1
    assert fakes.calls() == [["systemctl", "--user", "daemon-reload"]]
    assert "daemon-reload failed (exit 1)" in capsys.readouterr().err


def test_restart(fakes: Fakes) -> None:
    assert llamactl("restart") == 0
    assert fakes.calls() == [["systemctl", "--user", "restart", UNIT]]


def test_restart_failure(fakes: Fakes, capsys: pytest.CaptureFixture[str]) -> None:
    fakes.rule("systemctl --user restart", 5, stderr=f"Unit {UNIT} not found.")
    assert llamactl("restart") == 1
    assert capsys.readouterr().err == (
        f"llamactl service: systemctl --user restart {UNIT} failed (exit 5): "
        f"Unit {UNIT} not found.\n"
    )


def test_uninstall_disables_removes_and_reloads(fakes: Fakes, unit_file: Path) -> None:
    unit_file.parent.mkdir(parents=True)
    unit_file.write_text("x")
    assert llamactl("uninstall") == 0
    assert fakes.calls() == [
        ["systemctl", "--user", "disable", "--now", UNIT],
        ["systemctl", "--user", "daemon-reload"],
    ]
    assert not unit_file.exists()


def test_uninstall_failure_keeps_the_unit(
    fakes: Fakes, unit_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    unit_file.parent.mkdir(parents=True)
    unit_file.write_text("x")
    fakes.rule("systemctl --user disable", 1, stderr=NO_BUS)
    assert llamactl("uninstall") == 1
    assert unit_file.exists()
    assert "(exit 1)" in capsys.readouterr().err


def test_uninstall_when_not_installed(fakes: Fakes, capsys: pytest.CaptureFixture[str]) -> None:
    assert llamactl("uninstall") == 0
    assert fakes.calls() == []
    assert "not installed" in capsys.readouterr().out


def test_status_active(fakes: Fakes, unit_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """status parses ActiveState, SubState and MainPID from systemctl show."""
    unit_file.parent.mkdir(parents=True)
    unit_file.write_text("x")
    fakes.rule(
        "systemctl --user show", 0, stdout="ActiveState=active\nSubState=running\nMainPID=77\n"
    )
    assert llamactl("status") == 0
    assert fakes.calls() == [
        [
            "systemctl",
            "--user",
            "show",
            UNIT,
            "--property=ActiveState,SubState,MainPID,ExecMainStatus",
        ]
    ]
    assert capsys.readouterr().out == f"{UNIT}: active (running), pid 77\n"


def test_status_failed_exits_3(fakes: Fakes, capsys: pytest.CaptureFixture[str]) -> None:
    fakes.rule(
        "systemctl --user show", 0, stdout="ActiveState=failed\nSubState=failed\nMainPID=0\n"
    )
    assert llamactl("status") == 3
    assert capsys.readouterr().out == f"{UNIT}: failed (failed), not installed\n"


def test_status_names_a_bad_config(fakes: Fakes, capsys: pytest.CaptureFixture[str]) -> None:
    """Exit 2 is not restarted (RestartPreventExitStatus=2): status says it is the config."""
    fakes.rule(
        "systemctl --user show",
        0,
        stdout="ActiveState=failed\nSubState=failed\nMainPID=0\nExecMainStatus=2\n",
    )
    assert llamactl("status") == 3
    assert capsys.readouterr().out == (
        f"{UNIT}: failed (failed), not installed; bad config (exit 2, not restarted): "
        "run llamactl validate\n"
    )


@pytest.mark.parametrize("option", [["--system"], ["--label", "x"]])
def test_launchd_only_options_are_refused(
    fakes: Fakes, config: Path, option: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    """--system and --label mean nothing to systemd: exit 2 rather than ignore them."""
    assert llamactl("install", *option, "--config", str(config)) == 2
    assert "launchd only" in capsys.readouterr().err
    assert fakes.calls() == []
