"""llamad.launchd: the plist we render and the exact launchctl calls, via `llamactl service`.

launchctl cannot run here, so a recording stand-in goes first on PATH: it appends its argv to
a log and answers with the exit code, stdout and stderr of the longest matching rule.
"""

from __future__ import annotations

import os
import plistlib
import pwd
import stat
from pathlib import Path

import pytest
from stand_ins import Fakes, install_fakes, service_llamactl

from llamad.service import launchctl, launchd, launchd_example
from llamad.service.environment import CAPTURED

REPO = Path(__file__).resolve().parents[2]
UID = os.getuid()
LABEL = "dev.llamad.daemon"
GUI, USER = f"gui/{UID}", f"user/{UID}"
NO_GUI = "Bootstrap failed: 125: Domain does not support specified action"
PRINT_RUNNING = f"""{GUI}/{LABEL} = {{
\tactive count = 1
\tpath = /Users/me/Library/LaunchAgents/{LABEL}.plist
\tstate = running

\tprogram = /opt/llamad/bin/llamad
\targuments = {{
\t\tstate = not-a-top-level-key
\t}}
\tpid = 4242
\tlast exit code = (never exited)
}}
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake HOME, and a fake install whose bin dir holds llamad next to 'python'."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SUDO_USER", raising=False)
    for name in CAPTURED:  # whatever the shell running the tests sets
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(launchd, "SYSTEM_DIR", tmp_path / "LaunchDaemons")
    return home


@pytest.fixture
def fakes(tmp_path: Path, home: Path, monkeypatch: pytest.MonkeyPatch) -> Fakes:
    # Retries give up after a second here, not five.
    monkeypatch.setattr(launchctl, "RETRY_FOR_S", 1.0)
    monkeypatch.setattr(launchctl, "RETRY_EVERY_S", 0.05)
    monkeypatch.setattr(launchctl, "KILL_SLACK_S", 0.5)
    fakes = install_fakes(tmp_path, monkeypatch, "launchctl", "llamad")
    fakes.rule("launchctl print", 113, stderr="Could not find service")  # nothing loaded
    return fakes


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "llamad.toml"
    path.write_text(
        "[supervise]\nstop_timeout = 20\n\n[instances.big.supervise]\nstop_timeout = 42.5\n"
    )
    return path


def llamactl(*argv: str) -> int:
    return service_llamactl("launchd", *argv)


def agent_plist(home: Path, label: str = LABEL) -> Path:
    return home / "Library" / "LaunchAgents" / f"{label}.plist"


def test_the_plist_has_one_home() -> None:
    """The plist is built in llamad/service/launchd.py; launchd/ holds its rendered example."""
    assert not (REPO / "llamad" / "templates" / "llamad.plist").exists()
    assert sorted(p.name for p in (REPO / "launchd").iterdir()) == [
        "README.md",
        "dev.llamad.daemon.plist",
    ]
    assert "llamad/service/launchd.py" in (REPO / "launchd" / "README.md").read_text()


def test_the_example_plist_is_what_install_renders() -> None:
    """docs/operations.md points at launchd/dev.llamad.daemon.plist: it must stay true."""
    shipped = (REPO / "launchd" / "dev.llamad.daemon.plist").read_text()
    assert shipped == launchd_example.example(), (
        "regenerate: .venv/bin/python -m llamad.service.launchd_example "
        "> launchd/dev.llamad.daemon.plist"
    )


def test_install_writes_exactly_what_print_renders(
    fakes: Fakes, home: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert llamactl("install", "--print", "--config", str(config)) == 0
    printed = capsys.readouterr().out
    assert llamactl("install", "--config", str(config)) == 0
    assert agent_plist(home).read_text() == printed


def test_print_renders_the_whole_plist(
    fakes: Fakes, home: Path, tmp_path: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--print writes a plist with absolute paths, explicit PATH and the budgeted ExitTimeOut."""
    assert llamactl("install", "--print", "--config", str(config)) == 0
    plist = plistlib.loads(capsys.readouterr().out.encode())
    logs = home / "Library" / "Logs" / "llamad"
    bin_dir = tmp_path / "bin"
    assert plist == {
        "Label": LABEL,
        "ProgramArguments": [str(bin_dir / "llamad"), "--config", str(config)],
        "WorkingDirectory": str(config.parent),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 10,
        "ProcessType": "Interactive",
        # stop budget = max(20, 42.5) + 5 = 47.5; ExitTimeOut = ceil(47.5) + 5
        "ExitTimeOut": 53,
        "StandardOutPath": str(logs / "llamad.out.log"),
        "StandardErrorPath": str(logs / "llamad.err.log"),
        "EnvironmentVariables": {
            "PATH": f"{bin_dir}:/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
            "LLAMAD_CONFIG": str(config),
            "LLAMAD_SERVICE": "launchd",
        },
    }
    assert fakes.calls() == []


def test_plist_escapes_xml_and_carries_no_secrets(
    fakes: Fakes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Odd characters round-trip; tokens in our environment never reach the world-readable file."""
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    monkeypatch.setenv("LLAMAD_API_KEY", "sk-secret-value")
    config = tmp_path / "a <b> & 'c'.toml"
    assert llamactl("install", "--print", "--config", str(config)) == 0
    text = capsys.readouterr().out
    plist = plistlib.loads(text.encode())
    assert plist["ProgramArguments"][2] == str(config)
    assert "secret-value" not in text
    assert set(plist["EnvironmentVariables"]) == {"PATH", "LLAMAD_CONFIG", "LLAMAD_SERVICE"}


def test_fresh_install_enables_then_bootstraps_in_gui_domain(
    fakes: Fakes, home: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Not loaded anywhere: probe both domains, then enable + bootstrap gui/UID."""
    assert llamactl("install", "--config", str(config)) == 0
    path = agent_plist(home)
    assert fakes.calls() == [
        ["launchctl", "print", f"{GUI}/{LABEL}"],
        ["launchctl", "print", f"{USER}/{LABEL}"],
        ["launchctl", "enable", f"{GUI}/{LABEL}"],
        ["launchctl", "bootstrap", GUI, str(path)],
    ]
    assert stat.S_IMODE(path.stat().st_mode) == 0o644
    assert plistlib.loads(path.read_bytes())["Label"] == LABEL
    assert (home / "Library" / "Logs" / "llamad").is_dir()
    assert f"loaded {LABEL} in {GUI}" in capsys.readouterr().out


def test_install_falls_back_to_user_domain_without_gui_session(
    fakes: Fakes, home: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Over SSH bootstrap gui/ exits 125; enable + bootstrap are repeated in user/UID."""
    fakes.rule(f"launchctl bootstrap {GUI}", 125, stderr=NO_GUI)
    assert llamactl("install", "--config", str(config)) == 0
    path = str(agent_plist(home))
    assert fakes.calls()[2:] == [
        ["launchctl", "enable", f"{GUI}/{LABEL}"],
        ["launchctl", "bootstrap", GUI, path],
        ["launchctl", "enable", f"{USER}/{LABEL}"],
        ["launchctl", "bootstrap", USER, path],
    ]
    assert f"loaded {LABEL} in {USER}" in capsys.readouterr().out


def test_reinstall_boots_out_the_loaded_job_first(fakes: Fakes, home: Path, config: Path) -> None:
    """A loaded job keeps its old definition until booted out of the domain it is in."""
    fakes.answers(f"launchctl print {USER}/", 0, 113)  # loaded, then gone after bootout
    assert llamactl("install", "--config", str(config)) == 0
    assert fakes.calls() == [
        ["launchctl", "print", f"{GUI}/{LABEL}"],
        ["launchctl", "print", f"{USER}/{LABEL}"],
        ["launchctl", "bootout", f"{USER}/{LABEL}"],
        ["launchctl", "print", f"{USER}/{LABEL}"],
        ["launchctl", "enable", f"{GUI}/{LABEL}"],
        ["launchctl", "bootstrap", GUI, str(agent_plist(home))],
    ]


def test_reinstall_ignores_not_loaded_bootout(fakes: Fakes, home: Path, config: Path) -> None:
    """Plist present but job not loaded: the bootout's 'No such process' is not an error."""
    agent_plist(home).parent.mkdir(parents=True)
    agent_plist(home).write_text("old")
    fakes.rule("launchctl bootout", 3, stderr="Boot-out failed: 3: No such process")
    assert llamactl("install", "--config", str(config)) == 0
    assert [call[1] for call in fakes.calls()] == [
        "print",
        "print",
        "bootout",
        "print",
        "enable",
        "bootstrap",
    ]
    assert fakes.calls()[2] == ["launchctl", "bootout", f"{GUI}/{LABEL}"]
    assert plistlib.loads(agent_plist(home).read_bytes())["Label"] == LABEL


def test_reinstall_retries_bootout_while_in_progress_and_waits_for_the_job_to_go(
    fakes: Fakes, home: Path, config: Path
) -> None:
    """bootout answers 36 while an earlier one runs; the job lingers a moment after it;
    bootstrap answers 5 until launchd has let go. Each is retried, as Homebrew does."""
    fakes.answers(f"launchctl print {GUI}/", 0, 0, 0, 113)
    fakes.answers(
        "launchctl bootout", 36, 0, stderr="Boot-out failed: 36: Operation now in progress"
    )
    fakes.answers("launchctl bootstrap", 5, 5, 0, stderr="Bootstrap failed: 5: Input/output error")
    assert llamactl("install", "--config", str(config)) == 0
    target = f"{GUI}/{LABEL}"
    assert fakes.calls() == [
        ["launchctl", "print", target],
        ["launchctl", "bootout", target],
        ["launchctl", "bootout", target],
        ["launchctl", "print", target],
        ["launchctl", "print", target],
        ["launchctl", "print", target],
        ["launchctl", "enable", target],
        *[["launchctl", "bootstrap", GUI, str(agent_plist(home))]] * 3,
    ]


def test_a_job_that_outlives_its_bootout_stops_the_reinstall(
    fakes: Fakes, home: Path, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Given up after the old plist's ExitTimeOut (and a little): launchd's SIGKILL would
    have ended it by then."""
    agent_plist(home).parent.mkdir(parents=True)
    agent_plist(home).write_bytes(plistlib.dumps({"Label": LABEL, "ExitTimeOut": 1}))
    fakes.rule(f"launchctl print {GUI}/", 0)
    assert llamactl("install", "--config", str(config)) == 1
    assert f"{GUI}/{LABEL} is still loaded 1 s after bootout" in capsys.readouterr().err
    assert "bootstrap" not in [call[1] for call in fakes.calls()]


def test_bootout_failure_aborts_reinstall(
    fakes: Fakes, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any other bootout failure stops the install before anything is loaded."""
    fakes.rule(f"launchctl print {GUI}/", 0)
    fakes.rule("launchctl bootout", 1, stderr="Operation not permitted")
    assert llamactl("install", "--config", str(config)) == 1
    assert [call[1] for call in fakes.calls()] == ["print", "bootout"]
    assert capsys.readouterr().err == (
        f"llamactl service: launchctl bootout {GUI}/{LABEL} failed (exit 1): "
        "Operation not permitted\n"
    )


@pytest.mark.parametrize("domain", [GUI, USER])
def test_bootstrap_failure_is_one_line_with_exit_code(
    fakes: Fakes, home: Path, config: Path, capsys: pytest.CaptureFixture[str], domain: str
) -> None:
    """Exit 5 in gui/, or in user/ after the fallback, is reported with code and stderr."""
    fakes.rule(f"launchctl bootstrap {GUI}", 125, stderr=NO_GUI)
    fakes.rule(f"launchctl bootstrap {domain}", 5, stderr="Bootstrap failed: 5: Input/output error")
    assert llamactl("install", "--config", str(config)) == 1
    err = capsys.readouterr().err
    assert err == (
        f"llamactl service: launchctl bootstrap {domain} {agent_plist(home)} failed (exit 5): "
        "Bootstrap failed: 5: Input/output error\n"
    )


def test_enable_failure_is_reported(
    fakes: Fakes, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A failed enable stops before bootstrap."""
    fakes.rule("launchctl enable", 1, stderr="Not privileged to set domain overrides.")
    assert llamactl("install", "--config", str(config)) == 1
    assert fakes.calls()[-1] == ["launchctl", "enable", f"{GUI}/{LABEL}"]
    assert "(exit 1): Not privileged to set domain overrides." in capsys.readouterr().err


def test_system_install_writes_a_launch_daemon_for_the_sudo_user(
    fakes: Fakes, home: Path, tmp_path: Path, config: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """--system: /Library/LaunchDaemons, domain system, UserName = SUDO_USER."""
    monkeypatch.setenv("SUDO_USER", "llamad-test-nobody")
    assert llamactl("install", "--system", "--config", str(config)) == 0
    path = tmp_path / "LaunchDaemons" / f"{LABEL}.plist"
    assert fakes.calls() == [
        ["launchctl", "print", f"system/{LABEL}"],
        ["launchctl", "enable", f"system/{LABEL}"],
        ["launchctl", "bootstrap", "system", str(path)],
    ]
    plist = plistlib.loads(path.read_bytes())
    assert plist["UserName"] == "llamad-test-nobody"
    assert plist["StandardErrorPath"] == str(home / "Library/Logs/llamad/llamad.err.log")
    assert stat.S_IMODE(path.stat().st_mode) == 0o644


def test_system_plist_runs_as_current_user_without_sudo(
    fakes: Fakes, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Without SUDO_USER the invoking user is whoever runs llamactl."""
    assert llamactl("install", "--system", "--print", "--config", str(config)) == 0
    plist = plistlib.loads(capsys.readouterr().out.encode())
    assert plist["UserName"] == pwd.getpwuid(os.getuid()).pw_name


def test_label_option_names_file_and_targets(fakes: Fakes, home: Path, config: Path) -> None:
    """--label changes the plist name, the Label key and every launchctl target."""
    assert llamactl("install", "--label", "com.example.llm", "--config", str(config)) == 0
    path = agent_plist(home, "com.example.llm")
    assert plistlib.loads(path.read_bytes())["Label"] == "com.example.llm"
    assert fakes.calls()[-1] == ["launchctl", "bootstrap", GUI, str(path)]


def test_bad_label_is_a_usage_error(
    fakes: Fakes, config: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A label with a slash would escape the LaunchAgents dir; refused with exit 2."""
    assert llamactl("install", "--label", "../evil", "--config", str(config)) == 2
    assert "bad label" in capsys.readouterr().err
    assert fakes.calls() == []


@pytest.mark.parametrize(("loaded_in", "probes"), [(GUI, 1), (USER, 2)])
def test_restart_kickstarts_where_loaded(fakes: Fakes, loaded_in: str, probes: int) -> None:
    """A loaded job that is not running: restart = kickstart (never -k) where it is loaded.
    The graceful stop of a running one is in test_launchd_stop.py."""
    fakes.rule(f"launchctl print {loaded_in}/", 0)
    assert llamactl("restart") == 0
    assert len(fakes.calls()) == probes + 1
    assert fakes.calls()[-1] == ["launchctl", "kickstart", f"{loaded_in}/{LABEL}"]


def test_restart_when_not_loaded_fails(fakes: Fakes, capsys: pytest.CaptureFixture[str]) -> None:
    """Nothing to kickstart: say so and exit 1."""
    assert llamactl("restart") == 1
    assert "not loaded" in capsys.readouterr().err
    assert [call[1] for call in fakes.calls()] == ["print", "print"]


def test_kickstart_failure_is_reported(fakes: Fakes, capsys: pytest.CaptureFixture[str]) -> None:
    fakes.rule(f"launchctl print {GUI}/", 0)
    fakes.rule("launchctl kickstart", 37, stderr="Operation already in progress")
    assert llamactl("restart") == 1
    assert capsys.readouterr().err == (
        f"llamactl service: launchctl kickstart {GUI}/{LABEL} failed (exit 37): "
        "Operation already in progress\n"
    )


def test_uninstall_boots_out_and_removes_the_plist(fakes: Fakes, home: Path) -> None:
    """uninstall = bootout <domain>/LABEL, then the file goes."""
    agent_plist(home).parent.mkdir(parents=True)
    agent_plist(home).write_text("x")
    fakes.answers(f"launchctl print {GUI}/", 0, 113)
    assert llamactl("uninstall") == 0
    assert fakes.calls() == [
        ["launchctl", "print", f"{GUI}/{LABEL}"],
        ["launchctl", "bootout", f"{GUI}/{LABEL}"],
        ["launchctl", "print", f"{GUI}/{LABEL}"],
    ]
    assert not agent_plist(home).exists()


def test_uninstall_when_not_installed_is_a_no_op(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    assert llamactl("uninstall") == 0
    assert "not installed" in capsys.readouterr().out


def test_uninstall_bootout_failure_keeps_the_file(
    fakes: Fakes, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """If the job cannot be booted out, the plist stays so a retry can find it."""
    agent_plist(home).parent.mkdir(parents=True)
    agent_plist(home).write_text("x")
    fakes.rule(f"launchctl print {GUI}/", 0)
    fakes.rule("launchctl bootout", 150, stderr="Operation not permitted while System Integrity")
    assert llamactl("uninstall") == 1
    assert "(exit 150)" in capsys.readouterr().err
    assert agent_plist(home).exists()


def test_status_reports_loaded_state_and_pid(
    fakes: Fakes, capsys: pytest.CaptureFixture[str]
) -> None:
    """status parses the top-level 'state = running' and 'pid = N' of launchctl print."""
    fakes.rule(f"launchctl print {GUI}/", 0, stdout=PRINT_RUNNING)
    assert llamactl("status") == 0
    assert capsys.readouterr().out == f"{LABEL}: loaded in {GUI}, state running, pid 4242\n"
    assert fakes.calls() == [["launchctl", "print", f"{GUI}/{LABEL}"]]


def test_status_loaded_but_not_running(fakes: Fakes, capsys: pytest.CaptureFixture[str]) -> None:
    """A throttled crash loop shows its last exit code and exits 3."""
    fakes.rule(
        f"launchctl print {USER}/",
        0,
        stdout="x = {\n\tstate = not running\n\tlast exit code = 2\n}\n",
    )
    assert llamactl("status") == 3
    assert capsys.readouterr().out == (
        f"{LABEL}: loaded in {USER}, state not running, last exit code 2\n"
    )


OLD_REPORT = """llamad: /c.toml:2: instances.a: model is required
llamad: /c.toml: check it with: llamactl validate --config /c.toml
"""
SERVING = '{"event": "daemon.ready", "level": "info"}\n'
WAITING_REPORT = """llamad: /c.toml:3: instances.b: unknown key ctx_sise: did you mean ctx_size?
llamad: /c.toml:4: instances.b: model is required
llamad: /c.toml: check it with: llamactl validate --config /c.toml
llamad: /c.toml: waiting for a fixed config: save it again to retry
"""


def err_log(home: Path, text: str) -> None:
    path = home / "Library" / "Logs" / "llamad" / "llamad.err.log"
    path.parent.mkdir(parents=True)
    path.write_text(text)


def test_status_says_a_running_job_waits_for_a_fixed_config(
    fakes: Fakes, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """launchd shows it running; the end of its log says it serves nothing: exit 3 and why
    (the first problem of the latest report)."""
    fakes.rule(f"launchctl print {GUI}/", 0, stdout=PRINT_RUNNING)
    err_log(home, OLD_REPORT + SERVING + OLD_REPORT + WAITING_REPORT)
    assert llamactl("status") == 3
    assert capsys.readouterr().out == (
        f"{LABEL}: loaded in {GUI}, state running, pid 4242; bad config: "
        "/c.toml:3: instances.b: unknown key ctx_sise: did you mean ctx_size?; "
        "waiting for the config to change\n"
    )


def test_status_names_the_config_problem_of_a_job_that_exited_2(
    fakes: Fakes, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes.rule(f"launchctl print {GUI}/", 0, stdout="x = {\n\tstate = not running\n}\n")
    err_log(home, SERVING + OLD_REPORT)
    assert llamactl("status") == 3
    assert capsys.readouterr().out.endswith(
        "; bad config: /c.toml:2: instances.a: model is required\n"
    )


def test_status_ignores_a_report_the_daemon_has_served_since(
    fakes: Fakes, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fakes.rule(f"launchctl print {GUI}/", 0, stdout=PRINT_RUNNING)
    err_log(home, WAITING_REPORT + SERVING)
    assert llamactl("status") == 0
    assert "bad config" not in capsys.readouterr().out


def test_status_not_loaded(fakes: Fakes, capsys: pytest.CaptureFixture[str]) -> None:
    assert llamactl("status") == 3
    assert capsys.readouterr().out == f"{LABEL}: not loaded\n"


def test_missing_launchctl_is_reported(
    fakes: Fakes,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """No launchctl on PATH (not a Mac): one line, exit 1."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    assert llamactl("status") == 1
    assert capsys.readouterr().err == "llamactl service: launchctl not found on PATH\n"


def test_parse_print_keeps_only_top_level_fields() -> None:
    fields = launchctl.parse_print(PRINT_RUNNING)
    assert fields["state"] == "running"
    assert fields["pid"] == "4242"
    assert "arguments" not in fields


def test_install_carries_the_variables_the_config_depends_on(
    fakes: Fakes,
    home: Path,
    config: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """launchd passes the shell's variables on to no job: where models and caches are found
    is carried into the plist, secrets are not, and what cannot be carried is named."""
    monkeypatch.setenv("HF_HOME", "/data/hf")
    monkeypatch.setenv("OLLAMA_MODELS", "~/ollama")
    monkeypatch.setenv("XDG_CACHE_HOME", "cache")  # relative: meaningless in another cwd
    monkeypatch.setenv("HF_TOKEN", "hf_secret_value")
    assert llamactl("install", "--print", "--config", str(config)) == 0
    out, err = capsys.readouterr()
    env = plistlib.loads(out.encode())["EnvironmentVariables"]
    assert env["HF_HOME"] == "/data/hf"
    assert env["OLLAMA_MODELS"] == str(home / "ollama")
    assert "XDG_CACHE_HOME" not in env
    assert "HF_TOKEN" not in env
    assert err == (
        "llamactl service: warning: XDG_CACHE_HOME=cache is not an absolute path, so the "
        "service does not get it (it starts in another directory); set it to an absolute "
        "path and install again\n"
    )


def test_system_install_under_sudo_names_what_sudo_cleared(
    fakes: Fakes, config: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SUDO_USER", "llamad-test-nobody")
    monkeypatch.setenv("HF_HOME", "/data/hf")
    assert llamactl("install", "--system", "--print", "--config", str(config)) == 0
    err = capsys.readouterr().err
    assert "sudo cleared the environment, so HF_HUB_CACHE, OLLAMA_MODELS," in err
    assert "HF_HOME," not in err
    assert "install with sudo -E" in err


def test_install_warns_about_protected_folders_and_the_local_network(
    fakes: Fakes, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A config in ~/Documents with a fleet peer: two warnings for an agent; a --system
    daemon is exempt from Local Network privacy, not from the protected folders."""
    config = home / "Documents" / "llamad.toml"
    config.parent.mkdir()
    config.write_text('[[fleet.peers]]\nname = "mini"\nurl = "http://192.168.1.20:7777"\n')
    assert llamactl("install", "--print", "--config", str(config)) == 0
    agent = capsys.readouterr().err.splitlines()
    assert agent == [
        f"llamactl service: warning: the config is under ~/Documents ({config}): under "
        "launchd macOS refuses it (Operation not permitted) though Terminal may read it; "
        "move it elsewhere",
        "llamactl service: warning: this config uses the local network (fleet peers): macOS "
        "15 and later block a LaunchAgent's LAN traffic without asking (Local Network "
        "privacy); install with --system instead (a LaunchDaemon that runs as you, which is "
        "exempt)",
    ]
    assert llamactl("install", "--system", "--print", "--config", str(config)) == 0
    assert capsys.readouterr().err.splitlines() == agent[:1]
