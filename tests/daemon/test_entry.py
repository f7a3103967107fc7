"""What `llamad` imports: nothing of the daemon for `--help` and `--version`, and before
its first launch only what that launch needs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import free_port, write_config

from llamad import __version__

HEAVY = ("llamad.daemon.main", "structlog", "pydantic", "httpx", "psutil")


def probe(flag: str) -> tuple[str, list[str]]:
    """Run the `llamad` entry point with `flag` in a fresh interpreter: what it printed,
    and which of HEAVY it had imported by the time it exited."""
    code = (
        "import sys, json\n"
        "from llamad.daemon.entry import main\n"
        f"try:\n    main([{flag!r}])\n"
        "except SystemExit:\n    pass\n"
        f"print(json.dumps([m for m in {HEAVY!r} if m in sys.modules]))"
    )
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    *printed, imported = run.stdout.splitlines()
    return "\n".join(printed), json.loads(imported)


@pytest.mark.parametrize("flag", ["--help", "--version"])
def test_help_and_version_import_nothing_of_the_daemon(flag: str) -> None:
    printed, imported = probe(flag)
    assert imported == []
    assert (
        ("usage: llamad" in printed) if flag == "--help" else (printed == f"llamad {__version__}")
    )


# What the first launch does not wait for: the control API's web stack (after the launch,
# in a thread), httpx (with a pull or the gateway), the gateway, the MLX backend for a config
# without MLX instances, psutil (at the first record of a child), console-only modules
# under JSON logs, and the library's scanners without a library.
NOT_BEFORE_LAUNCH = (
    "llamad.library.scan",
    "llamad.daemon.services",
    "llamad.api",
    "llamad.gateway",
    "llamad.backends.mlx",
    "starlette",
    "llamad.listener",
    "prometheus_client",
    "watchfiles",
    "httpx",
    "httpcore",
    "rich",
    "colorama",
    "click",
    "psutil",
)


def modules_after(code: str) -> list[str]:
    """The modules a fresh interpreter holds after running `code`."""
    code += "\nimport sys, json\n"
    code += "print(json.dumps([m for m, module in sys.modules.items() if module is not None]))"
    run = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=30
    )
    return list(json.loads(run.stdout.splitlines()[-1]))


def loaded_by_daemon(log_format: str, config: Path) -> list[str]:
    """In a fresh interpreter, as `llamad` does before its first launch: import the daemon
    and load `config`; which packages of NOT_BEFORE_LAUNCH are then imported."""
    loaded = modules_after(
        "from pathlib import Path\n"
        "from llamad.daemon.entry import load_daemon, parse_args\n"
        f"load_daemon(parse_args(['--log-format', {log_format!r}]))\n"
        "from llamad.config.load import load\n"
        f"load(Path({str(config)!r}))"
    )
    return sorted({p for p in NOT_BEFORE_LAUNCH for m in loaded if m == p or m.startswith(f"{p}.")})


def test_the_first_launch_waits_only_for_what_it_needs(tmp_path: Path, tiny_model: Path) -> None:
    """Module presence, not timing: what cold start at N=1 is made of (bench/cold_start)."""
    cfg = write_config(
        tmp_path / "llamad.toml",
        {"a": {"model": tiny_model, "port": free_port()}},
        daemon={"state_dir": str(tmp_path / "state")},
    )
    assert loaded_by_daemon("json", cfg) == []


def test_console_logs_still_get_rich_tracebacks_where_rich_is_installed(
    tmp_path: Path, tiny_model: Path
) -> None:
    pytest.importorskip("rich")
    cfg = write_config(
        tmp_path / "llamad.toml",
        {"a": {"model": tiny_model, "port": free_port()}},
        daemon={"state_dir": str(tmp_path / "state")},
    )
    assert "rich" in loaded_by_daemon("console", cfg)


def test_a_daemon_without_a_gateway_never_loads_its_stack() -> None:
    """The services a running daemon starts leave the gateway's modules to a config that
    has a `[gateway]`: the idle footprint stays as it was."""
    loaded = modules_after("import llamad.daemon.services")
    assert [m for m in loaded if m.startswith("llamad.gateway")] == []


def test_a_probing_daemon_loads_no_general_http_client() -> None:
    """Probes and the services of a daemon without a gateway go through the daemon's own
    client: httpx's stack, and what httpcore imports whenever it is installed (trio, h2),
    loads only with a pull or a gateway (the idle footprint, bench/footprint)."""
    loaded = modules_after(
        "import asyncio\n"
        "import llamad.daemon.services\n"
        "from llamad.backends.probes import Prober\n"
        "asyncio.run(Prober().probe('http://127.0.0.1:1/health', 0.5))"
    )
    stacks = ("httpx", "httpcore", "trio", "h2")
    assert [m for m in loaded if m.split(".")[0] in stacks] == []
