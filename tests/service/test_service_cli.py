"""llamad.service: the `llamactl service` command line and the pieces both back ends share."""

from __future__ import annotations

import argparse
import os
import platform
import plistlib
import subprocess
import sys
from pathlib import Path

import pytest

from llamad.cli.parser import build_parser
from llamad.service import common
from llamad.service.common import ServiceError


@pytest.fixture(autouse=True)
def _env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fake HOME, no inherited config, and a llamad executable next to a fake python."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("XDG_CONFIG_HOME", raising=False)
    monkeypatch.delenv("LLAMAD_CONFIG", raising=False)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "llamad").write_text("#!/bin/sh\n")
    (bin_dir / "llamad").chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))


def make_parser() -> argparse.ArgumentParser:
    """llamactl's own parser, service commands included."""
    return build_parser(service=True)


def llamactl(*argv: str) -> int:
    args = make_parser().parse_args(list(argv))
    result: int = args.func(args)
    return result


@pytest.mark.parametrize("command", ["install", "uninstall", "status", "restart"])
def test_every_sub_command_has_help(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        make_parser().parse_args(["service", command, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert f"llamactl service {command}" in out
    assert "--label" in out
    assert "--system" in out
    assert "--manager" not in out  # hidden: it exists for tests and odd setups


def test_install_help_lists_its_options(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        make_parser().parse_args(["service", "install", "--help"])
    out = capsys.readouterr().out
    assert "--print" in out
    assert "--config" in out


def test_service_needs_a_sub_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        make_parser().parse_args(["service"])
    assert done.value.code == 2


@pytest.mark.parametrize(
    ("explicit", "system", "expected"),
    [
        (None, "Darwin", "launchd"),
        (None, "Linux", "systemd"),
        ("launchd", "Linux", "launchd"),
        ("systemd", "Darwin", "systemd"),
    ],
)
def test_choose_manager(explicit: str | None, system: str, expected: str) -> None:
    assert common.choose_manager(explicit, system) == expected


def test_unsupported_platform(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Anywhere but macOS and Linux, service commands say so and exit 2."""
    monkeypatch.setattr(platform, "system", lambda: "Windows")
    assert llamactl("service", "status") == 2
    assert capsys.readouterr().err == "llamactl service: no service manager for Windows\n"


@pytest.mark.parametrize(("system", "marker"), [("Darwin", "<plist"), ("Linux", "[Service]")])
def test_platform_picks_the_backend(
    system: str,
    marker: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(platform, "system", lambda: system)
    assert llamactl("service", "install", "--print") == 0
    assert marker in capsys.readouterr().out


def test_config_default_is_xdg_config_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    expected = tmp_path / "xdg" / "llamad" / "llamad.toml"
    assert common.resolve_config(None, os.environ) == expected


def test_config_default_without_xdg_is_dot_config(tmp_path: Path) -> None:
    assert common.resolve_config(None, {}) == tmp_path / "home" / ".config/llamad/llamad.toml"
    # A relative XDG_CONFIG_HOME is invalid per the spec and ignored.
    relative = common.resolve_config(None, {"XDG_CONFIG_HOME": "rel"})
    assert relative == tmp_path / "home" / ".config/llamad/llamad.toml"


def test_config_env_var_and_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--config beats LLAMAD_CONFIG; both are made absolute (and ~ is expanded)."""
    monkeypatch.chdir(tmp_path)
    assert common.resolve_config(None, {"LLAMAD_CONFIG": "env.toml"}) == tmp_path / "env.toml"
    got = common.resolve_config("sub/../opt.toml", {"LLAMAD_CONFIG": "env.toml"})
    assert got == tmp_path / "opt.toml"
    assert common.resolve_config("~/x.toml", {}) == tmp_path / "home" / "x.toml"


def test_relative_config_option_lands_absolute_in_the_plist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    code = llamactl("service", "install", "--print", "--config", "c.toml", "--manager", "launchd")
    assert code == 0
    plist = plistlib.loads(capsys.readouterr().out.encode())
    assert plist["ProgramArguments"] == [
        str(tmp_path / "bin/llamad"),
        "--config",
        str(tmp_path / "c.toml"),
    ]
    assert plist["EnvironmentVariables"]["LLAMAD_CONFIG"] == str(tmp_path / "c.toml")


def test_global_config_option_survives_the_sub_parser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`llamactl --config F service install` uses F: the sub-parser does not reset it."""
    config = tmp_path / "global.toml"
    argv = ["--config", str(config), "service", "install", "--print", "--manager", "launchd"]
    assert llamactl(*argv) == 0
    assert plistlib.loads(capsys.readouterr().out.encode())["ProgramArguments"][2] == str(config)


def test_install_refuses_a_missing_config(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Installing a job that can only exit 2 in a loop helps nobody; --print is still fine."""
    missing = tmp_path / "nope.toml"
    assert llamactl("service", "install", "--config", str(missing), "--manager", "systemd") == 2
    assert capsys.readouterr().err == (
        f"llamactl service: config file {missing} not found; create it or pass --config\n"
    )


@pytest.mark.parametrize(
    ("toml", "budget"),
    [
        ("", 15.0),
        ("[supervise]\nstop_timeout = 3\n", 8.0),
        ("[supervise]\nstop_timeout = 3\n[instances.a.supervise]\nstop_timeout = 30\n", 35.0),
        ("[instances.a.supervise]\nstop_timeout = 4\n", 15.0),  # a's peers keep the default 10
        ("[supervise]\nstop_timeout = 2.5\n[instances.a]\nmodel = 'x'\n", 7.5),
        ("[supervise]\nstop_timeout = true\n", 15.0),
        ("this is not toml", 15.0),
        # A gateway drains first: its shutdown_delay (default 0) and shutdown_grace (10).
        ("[gateway]\nlisten = '127.0.0.1:8080'\n", 25.0),
        ("[gateway]\nlisten = ':8080'\nshutdown_delay = 5\nshutdown_grace = 20\n", 40.0),
        ("[gateway]\nshutdown_delay = 5\n", 15.0),  # no listen: no gateway
    ],
)
def test_stop_budget_reads_the_toml(toml: str, budget: float, tmp_path: Path) -> None:
    """The gateway's drain, then the slowest stop_timeout (default 10), + 5 s, read
    from the TOML alone."""
    path = tmp_path / "c.toml"
    path.write_text(toml)
    assert common.stop_budget(path) == budget


def test_stop_budget_missing_file_uses_default(tmp_path: Path) -> None:
    assert common.stop_budget(tmp_path / "missing.toml") == 15.0


@pytest.mark.parametrize(("budget", "seconds"), [(15.0, 20), (15.2, 21), (0.0, 5)])
def test_stop_timeout_seconds(budget: float, seconds: int) -> None:
    assert common.stop_timeout_seconds(budget) == seconds


def test_find_llamad_next_to_the_interpreter(tmp_path: Path) -> None:
    assert common.find_llamad() == tmp_path / "bin" / "llamad"


def test_find_llamad_falls_back_to_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other"
    other.mkdir()
    monkeypatch.setattr(sys, "executable", str(other / "python"))
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert common.find_llamad() == tmp_path / "bin" / "llamad"
    monkeypatch.setenv("PATH", str(other))
    with pytest.raises(ServiceError, match="cannot find the llamad executable"):
        common.find_llamad()


def test_failure_line_joins_multi_line_stderr() -> None:
    """Several stderr lines still make one line; stdout is used when stderr is empty."""
    result = subprocess.CompletedProcess(["x", "y"], 4, stdout="", stderr="one\n two\n")
    assert str(common.failure(result)) == "x y failed (exit 4): one; two"
    quiet = subprocess.CompletedProcess(["x"], 4, stdout="said this\n", stderr="")
    assert str(common.failure(quiet)) == "x failed (exit 4): said this"
