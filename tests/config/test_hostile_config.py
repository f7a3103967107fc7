"""Configs written carelessly or with ill intent: refused with one line, never a traceback,
and never echoing a secret back (issue #16, items 3, 6 to 13)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from llamad.config.load import check

SECRET = "SEKRIT-abcdef0123456789"


def problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "llamad.toml"
    path.write_text(text)
    return check(path)


def run_llamad(path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "llamad", "--config", str(path)],
        capture_output=True,
        text=True,
        timeout=30,
    )


@pytest.mark.parametrize(
    "line",
    [
        f'api_key = ["{SECRET}", true]',
        f"api_key = {{ k = '{SECRET}' }}",
        f'hf_token = [true, "{SECRET}"]',
        f'env = {{ MY_TOKEN = ["{SECRET}"] }}',
    ],
)
def test_secret_values_never_appear_in_errors(tmp_path: Path, tiny_model: Path, line: str) -> None:
    """A malformed secret key is named in the error, but its value is not echoed."""
    found = problems(tmp_path, f'[instances.a]\nmodel = "{tiny_model}"\nport = 1\n{line}\n')
    assert found, "expected a problem"
    assert all(SECRET not in ln for ln in found), found
    assert any("[redacted]" in ln for ln in found), found


def test_secret_in_supervise_table_not_echoed(tmp_path: Path, tiny_model: Path) -> None:
    """Structure errors (pydantic) redact secret-looking keys too."""
    found = problems(
        tmp_path,
        f'[daemon]\nlog_level = "info"\n[fleet]\ntoken_file = ["{SECRET}"]\n'
        f'[instances.a]\nmodel = "{tiny_model}"\nport = 1\n',
    )
    assert found
    assert all(SECRET not in ln for ln in found), found


def test_log_backups_zero_is_refused(tmp_path: Path) -> None:
    """log_backups = 0 would silently disable rotation in the stdlib handler."""
    found = problems(tmp_path, "[daemon]\nlog_backups = 0\n")
    assert len(found) == 1, found
    assert "daemon.log_backups" in found[0], found
    assert found[0].startswith(f"{tmp_path}/llamad.toml:2: "), found


def test_empty_instance_name_is_one_line_exit_2(tmp_path: Path) -> None:
    """`[instances.""]` is a config error (exit 2, one line), not a traceback."""
    path = tmp_path / "c.toml"
    path.write_text('[instances.""]\nport = 1\n')
    run = run_llamad(path)
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    problems = [ln for ln in run.stderr.splitlines() if "check it with" not in ln]
    assert len(problems) == 1, run.stderr
    assert "instance name" in problems[0]


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("[supervise]\nhealth_interval = 0.001\n", "supervise.health_interval"),
        ("[supervise]\nstop_timeout = inf\n", "supervise.stop_timeout"),
        ("[supervise]\nstart_timeout = nan\n", "supervise.start_timeout"),
        (
            '[instances.a]\nmodel = "{m}"\nport = 1\n[instances.a.supervise]\nstop_timeout = inf\n',
            "instances.a.supervise.stop_timeout",
        ),
        ('[instances.a]\nmodel = "{m}"\nport = "\uff18\uff10\uff18\uff10"\n', "instances.a.port"),
        ('[instances.a]\nmodel = "{m}"\nport = "+80"\n', "instances.a.port"),
    ],
    ids=["tiny interval", "inf stop", "nan start", "inf per instance", "fullwidth port", "+port"],
)
def test_knob_bounds(tmp_path: Path, tiny_model: Path, body: str, needle: str) -> None:
    """Intervals have a floor, timeouts are finite, ports are ASCII digits."""
    found = problems(tmp_path, body.replace("{m}", str(tiny_model)))
    assert any(needle in ln for ln in found), found


@pytest.mark.parametrize(
    ("first", "second"),
    [("localhost", "127.0.0.1"), ("127.0.0.1", "localhost"), ("0.0.0.0", "localhost")],
)
def test_port_clash_across_loopback_spellings(
    tmp_path: Path, tiny_model: Path, first: str, second: str
) -> None:
    """localhost and 127.0.0.1 are the same address for a port clash."""
    found = problems(
        tmp_path,
        f'[instances.a]\nmodel = "{tiny_model}"\nport = 9100\nhost = "{first}"\n'
        f'[instances.b]\nmodel = "{tiny_model}"\nport = 9100\nhost = "{second}"\n',
    )
    assert any("instances.b.port" in ln and "instances.a" in ln for ln in found), found


def test_port_clash_with_remote_listen(tmp_path: Path, tiny_model: Path) -> None:
    """An instance on the port of `[daemon.remote] listen` is a config error."""
    token = tmp_path / "admin.token"
    token.write_text("a" * 32)
    token.chmod(0o600)
    found = problems(
        tmp_path,
        f'[daemon.remote]\nlisten = "127.0.0.1:9200"\ntoken_file = "{token}"\n'
        f'[instances.a]\nmodel = "{tiny_model}"\nport = 9200\n',
    )
    assert any("instances.a.port" in ln and "daemon.remote" in ln for ln in found), found


def test_secret_flag_with_spaces_in_args(tmp_path: Path, tiny_model: Path) -> None:
    """`" --api-key"` with a leading space does not slip past the secret-flag rule."""
    found = problems(
        tmp_path,
        f'[instances.a]\nmodel = "{tiny_model}"\nport = 1\nargs = [" --api-key ", "{SECRET}"]\n',
    )
    assert any("would show the key in `ps`" in ln for ln in found), found


def test_group_readable_api_key_file_is_refused(tmp_path: Path, tiny_model: Path) -> None:
    """api_key_file is held to the token files' rule: owner-only."""
    key = tmp_path / "keys"
    key.write_text(SECRET + "\n")
    key.chmod(0o640)
    found = problems(
        tmp_path, f'[instances.a]\nmodel = "{tiny_model}"\nport = 1\napi_key_file = "{key}"\n'
    )
    assert any("instances.a.api_key_file" in ln and "chmod 600" in ln for ln in found), found


# Root reads any file whatever its mode; this sysctl is write-only even for root.
_WRITE_ONLY = Path("/proc/sys/vm/compact_memory")


def test_unreadable_model_is_refused(tmp_path: Path, tiny_model: Path) -> None:
    """A model file that exists but cannot be read fails validation, naming the cause."""
    if os.geteuid() == 0:
        if not _WRITE_ONLY.is_file():
            pytest.skip("running as root without a write-only file to stand in")
        model = _WRITE_ONLY
    else:
        model = tmp_path / "locked.gguf"
        model.write_bytes(tiny_model.read_bytes())
        model.chmod(0)
    found = problems(tmp_path, f'[instances.a]\nmodel = "{model}"\nport = 1\n')
    assert any("instances.a.model" in ln and "cannot read" in ln for ln in found), found


def test_every_layer_reported_in_one_run(tmp_path: Path, tiny_model: Path) -> None:
    """A structure error elsewhere does not hide the instance problems behind it."""
    found = problems(
        tmp_path,
        '[daemon]\nlog_level = "loud"\n[supervise]\nhealth_interval = -1\n'
        "[instances.a]\nport = 1\n"
        f'[instances.b]\nmodel = "{tiny_model}"\nport = 2\nctx_sise = 1\n',
    )
    joined = "\n".join(found)
    for needle in (
        "daemon.log_level",
        "supervise.health_interval",
        "instances.a: model is required",
        "instances.b.ctx_sise",
    ):
        assert needle in joined, found


def test_gateway_listen_clash_across_loopback_spellings(tmp_path: Path, tiny_model: Path) -> None:
    """An instance on `localhost` at the port of `[gateway] listen = "127.0.0.1:..."`."""
    found = problems(
        tmp_path,
        '[gateway]\nlisten = "127.0.0.1:9300"\n'
        f'[instances.a]\nmodel = "{tiny_model}"\nport = 9300\nhost = "localhost"\n',
    )
    assert any("gateway.listen" in ln and "instances.a" in ln for ln in found), found


def test_gateway_listen_clash_with_remote_listen(tmp_path: Path, tiny_model: Path) -> None:
    """`[gateway] listen` on the port of `[daemon.remote] listen` is a config error."""
    token = tmp_path / "admin.token"
    token.write_text("a" * 32)
    token.chmod(0o600)
    found = problems(
        tmp_path,
        f'[daemon.remote]\nlisten = "0.0.0.0:9400"\ntoken_file = "{token}"\n'
        '[gateway]\nlisten = "localhost:9400"\n'
        f'[instances.a]\nmodel = "{tiny_model}"\nport = 9401\n',
    )
    assert any("gateway.listen" in ln and "daemon.remote.listen" in ln for ln in found), found
