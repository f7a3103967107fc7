"""`llamactl service` on Linux: a systemd user unit, `~/.config/systemd/user/llamad.service`.

The unit is `templates/llamad.service`; its comments explain the restart and stop settings.
Everything goes through `systemctl --user`, so no root is needed; `loginctl enable-linger`
is what makes a user unit start at boot and survive logout.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping
from importlib import resources
from pathlib import Path
from string import Template

from llamad.common import paths
from llamad.common.service_job import EXIT_CONFIG
from llamad.service import environment
from llamad.service.common import (
    InstallOptions,
    Options,
    ServiceError,
    run_tool,
    stop_timeout_seconds,
)

UNIT = "llamad.service"
# The user manager's PATH is minimal and our shell's PATH is not ours to copy.
BASE_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
SYSTEMCTL = ["systemctl", "--user"]


def unit_path(home: Path, environ: Mapping[str, str] | None = None) -> Path:
    """Where the user unit goes: $XDG_CONFIG_HOME/systemd/user, else ~/.config/systemd/user."""
    return paths.xdg_base("XDG_CONFIG_HOME", ".config", environ, home) / "systemd" / "user" / UNIT


def quote(value: str, *, exec_arg: bool = False) -> str:
    """One word of a unit file setting, escaped so systemd reads back exactly `value`.

    `%` starts a specifier everywhere; `$` expands variables only in Exec lines. Words with
    blanks, quotes or backslashes are double-quoted with C-style escapes.
    """
    if any(ch in value for ch in "\n\r\0"):
        raise ServiceError(f"cannot put {value!r} in a unit file: it contains a line break")
    value = value.replace("%", "%%")
    if exec_arg:
        value = value.replace("$", "$$")
    if value and not any(ch in value for ch in " \t\"'\\;"):
        return value
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _reject_launchd_options(opts: Options) -> None:
    # Failing loudly beats silently ignoring an option the user thought took effect.
    if opts.system:
        raise ServiceError("--system is launchd only; use loginctl enable-linger instead", 2)
    if opts.label:
        raise ServiceError(f"--label is launchd only; the systemd unit is always {UNIT}", 2)


def render(opts: InstallOptions) -> str:
    """The unit file text `install` writes (and `--print` shows)."""
    _reject_launchd_options(opts)
    args = (str(opts.llamad), "--config", str(opts.config))
    # llamad's own bin dir first: a pip-installed llama-server sits next to it.
    path = ":".join(dict.fromkeys([str(opts.llamad.parent), *BASE_PATH.split(":")]))
    values = {
        "exec_start": " ".join(quote(arg, exec_arg=True) for arg in args),
        "path_env": quote(f"PATH={path}"),
        "config_env": quote(f"LLAMAD_CONFIG={opts.config}"),
        "captured_env": "".join(
            f"\nEnvironment={quote(f'{name}={value}')}"
            for name, value in environment.capture(opts.environ)[0].items()
        ),
        "working_directory": quote(str(opts.config.parent)),
        "timeout_stop": str(stop_timeout_seconds(opts.stop_budget)),
    }
    template = resources.files("llamad").joinpath("templates/llamad.service").read_text("utf-8")
    return Template(template).substitute(values)


def warnings(opts: InstallOptions) -> list[str]:
    """The variables that cannot be carried into the unit; the other launchd pitfalls
    (protected folders, Local Network privacy) are macOS's."""
    return environment.capture(opts.environ)[1]


def install(opts: InstallOptions) -> list[str]:
    """Write the unit (0644), daemon-reload, then enable and start it."""
    text, path = render(opts), unit_path(opts.home)
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o644)
        tmp.replace(path)
    except OSError as exc:
        raise ServiceError(f"cannot write {path}: {exc.strerror or exc}") from None
    run_tool([*SYSTEMCTL, "daemon-reload"])
    if existed:
        # enable --now leaves an already running llamad on the old unit; restart picks up the
        # new one, and starts it if it was stopped.
        run_tool([*SYSTEMCTL, "enable", UNIT])
        run_tool([*SYSTEMCTL, "restart", UNIT])
    else:
        run_tool([*SYSTEMCTL, "enable", "--now", UNIT])
    user = pwd.getpwuid(os.getuid()).pw_name
    return [
        f"wrote {path}",
        f"enabled and started {UNIT}",
        f"logs: journalctl --user -u {UNIT}",
        f"to start it at boot and keep it after logout, run: loginctl enable-linger {user}",
    ]


def uninstall(opts: Options) -> list[str]:
    """Stop and disable the unit, remove the file, daemon-reload."""
    _reject_launchd_options(opts)
    path = unit_path(opts.home)
    if not path.exists():
        return [f"{UNIT} is not installed ({path} not found)"]
    run_tool([*SYSTEMCTL, "disable", "--now", UNIT])
    try:
        path.unlink()
    except OSError as exc:
        raise ServiceError(f"cannot remove {path}: {exc.strerror or exc}") from None
    run_tool([*SYSTEMCTL, "daemon-reload"])
    return [f"stopped and disabled {UNIT}", f"removed {path}"]


def restart(opts: Options) -> list[str]:
    """`systemctl --user restart llamad.service`."""
    _reject_launchd_options(opts)
    run_tool([*SYSTEMCTL, "restart", UNIT])
    return [f"restarted {UNIT}"]


def status(opts: Options) -> tuple[int, str]:
    """(0, line) when active, else (3, line): ActiveState (SubState) and the main pid."""
    _reject_launchd_options(opts)
    props = "--property=ActiveState,SubState,MainPID,ExecMainStatus"
    result = run_tool([*SYSTEMCTL, "show", UNIT, props])
    fields = parse_show(result.stdout)
    active = fields.get("ActiveState", "unknown")
    line = f"{UNIT}: {active} ({fields.get('SubState', 'unknown')})"
    if fields.get("MainPID", "0") not in ("", "0"):
        line += f", pid {fields['MainPID']}"
    if not unit_path(opts.home).exists():
        line += ", not installed"
    if active != "active" and fields.get("ExecMainStatus") == str(EXIT_CONFIG):
        # RestartPreventExitStatus: the unit stays down until the file is fixed.
        line += f"; bad config (exit {EXIT_CONFIG}, not restarted): run llamactl validate"
    return (0 if active == "active" else 3), line


def parse_show(text: str) -> dict[str, str]:
    """`systemctl show` output (`Key=value` per line) as a dict."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip()
    return fields
