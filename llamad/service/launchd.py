"""`llamactl service` on macOS: a LaunchAgent, or with --system a LaunchDaemon.

The plist is written with plistlib (world-readable, so nothing secret goes in). Its keys:
- every path absolute, PATH spelled out and WorkingDirectory the config's directory:
  launchd passes on no shell environment and starts jobs in `/`;
- `KeepAlive = {SuccessfulExit = false}`, not `true`: a clean exit (a stop asked for)
  stays stopped, a crash or non-zero exit comes back;
- `ThrottleInterval = 10`: launchd spaces restarts 10 s apart, and that is all it does:
  it has no way to leave one exit code alone. So `LLAMAD_SERVICE=launchd` tells llamad
  that launchd runs it, and a bad config then waits for the file to change (or 5
  minutes) before exiting 2, instead of a restart every 10 s forever
  (`llamad/daemon/config_wait.py`);
- `ProcessType = Interactive`: without it launchd throttles CPU and I/O, slowing inference;
- `ExitTimeOut`: seconds between SIGTERM and SIGKILL, longer than llamad needs to stop.
"""

from __future__ import annotations

import os
import plistlib
import pwd
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from llamad.common.service_job import SERVICE_ENV
from llamad.service import environment, mac_checks
from llamad.service.common import (
    DEFAULT_LABEL,
    InstallOptions,
    Options,
    ServiceError,
    failure,
    run_tool,
    stop_timeout_seconds,
)
from llamad.service.joblog import config_problem
from llamad.service.launchctl import (
    LAUNCHD_EXIT_TIMEOUT,
    bootout,
    bootstrap,
    loaded_in,
    parse_print,
    running_pid,
    stop,
)

# Read at call time, so tests can point it at a temporary directory.
SYSTEM_DIR = Path("/Library/LaunchDaemons")
# launchd gives jobs a bare PATH; Homebrew on Apple silicon lives in /opt/homebrew.
BASE_PATH = "/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
# `launchctl bootstrap gui/UID` over SSH: "Domain does not support specified action".
NO_GUI_SESSION = 125
OUT_LOG, ERR_LOG = "llamad.out.log", "llamad.err.log"
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class Job:
    """Where one job lives: its plist, its logs and the launchd domains to try, in order."""

    label: str
    plist: Path
    log_dir: Path
    domains: tuple[str, ...]
    home: Path  # the home of the user it runs as
    user_name: str | None = None


def job_for(opts: Options) -> Job:
    """A LaunchAgent in ~/Library/LaunchAgents, or with `system` a LaunchDaemon for the user."""
    label = opts.label or DEFAULT_LABEL
    if not _LABEL.fullmatch(label):
        raise ServiceError(f"bad label {label!r}: use letters, digits, '.', '-' and '_'", 2)
    if opts.system:
        user, home = _invoking_user(opts.home)
        logs = home / "Library" / "Logs" / "llamad"
        return Job(label, SYSTEM_DIR / f"{label}.plist", logs, ("system",), home, user)
    uid, home = os.getuid(), opts.home
    plist = home / "Library" / "LaunchAgents" / f"{label}.plist"
    # gui/ needs a login at the screen; user/ exists even for an SSH-only session.
    domains = (f"gui/{uid}", f"user/{uid}")
    return Job(label, plist, home / "Library" / "Logs" / "llamad", domains, home)


def _invoking_user(home: Path) -> tuple[str, Path]:
    """The user a LaunchDaemon should run as: whoever ran sudo, else ourselves."""
    sudo_user = os.environ.get("SUDO_USER")
    if not sudo_user:
        return pwd.getpwuid(os.getuid()).pw_name, home
    entry = _passwd(sudo_user)
    return sudo_user, Path(entry.pw_dir) if entry else home


def render(opts: InstallOptions) -> str:
    """The plist `install` writes (and `--print` shows); ExitTimeOut = ceil(stop_budget) + 5."""
    job = job_for(opts)
    # llamad's own bin dir first: a pip-installed llama-server sits next to it.
    path = ":".join(dict.fromkeys([str(opts.llamad.parent), *BASE_PATH.split(":")]))
    plist: dict[str, Any] = {
        "Label": job.label,
        "ProgramArguments": [str(opts.llamad), "--config", str(opts.config)],
        "EnvironmentVariables": {
            "PATH": path,
            "LLAMAD_CONFIG": str(opts.config),
            SERVICE_ENV: "launchd",
            **environment.capture(opts.environ)[0],
        },
        "WorkingDirectory": str(opts.config.parent),
        "RunAtLoad": True,
        "KeepAlive": {"SuccessfulExit": False},
        "ThrottleInterval": 10,
        "ProcessType": "Interactive",
        "ExitTimeOut": stop_timeout_seconds(opts.stop_budget),
        "StandardOutPath": str(job.log_dir / OUT_LOG),
        "StandardErrorPath": str(job.log_dir / ERR_LOG),
    }
    if job.user_name:
        plist["UserName"] = job.user_name
    try:
        return plistlib.dumps(plist, sort_keys=False).decode()
    except ValueError as exc:  # e.g. a control character in a path: no valid plist holds it
        raise ServiceError(f"cannot render a valid plist: {exc}") from None


def warnings(opts: InstallOptions) -> list[str]:
    """What will not work under launchd as it does in Terminal: variables that cannot be
    carried, protected folders, and an agent's local network traffic."""
    data = mac_checks.read_config(opts.config)
    found = environment.capture(opts.environ)[1]
    found += mac_checks.protected_warnings(data, opts.config, opts.llamad, job_for(opts).home)
    if not opts.system and (lan := mac_checks.local_network_warning(data)) is not None:
        found.append(lan)
    return found


def install(opts: InstallOptions) -> list[str]:
    """Write the plist (0644) and load it: enable + bootstrap, gui/ then user/ without a GUI."""
    job, text = job_for(opts), render(opts)
    loaded = loaded_in(job.domains, job.label)
    if loaded is not None or job.plist.exists():
        # A loaded job keeps its old definition until booted out; bootstrap would fail (5).
        # The running job stops within its old plist's ExitTimeOut, not the new one's.
        pid = running_pid(loaded[1]) if loaded else None
        bootout(loaded[0] if loaded else job.domains[0], job.label, pid, exit_timeout(job))
    try:
        job.plist.parent.mkdir(parents=True, exist_ok=True)
        job.log_dir.mkdir(parents=True, exist_ok=True)
        if job.user_name and os.geteuid() == 0 and (owner := _passwd(job.user_name)):
            os.chown(job.log_dir, owner.pw_uid, owner.pw_gid)  # the daemon runs as the user
        tmp = job.plist.with_name(job.plist.name + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o644)
        tmp.replace(job.plist)
    except OSError as exc:
        raise ServiceError(f"cannot write {job.plist}: {exc.strerror or exc}") from None
    lines = [f"wrote {job.plist}"]
    for domain in job.domains:
        bad = bootstrap(domain, job.label, str(job.plist))
        if bad is None:
            lines.append(f"loaded {job.label} in {domain}")
            break
        no_gui = bad.returncode == NO_GUI_SESSION or "does not support" in bad.stderr
        if domain == job.domains[-1] or not no_gui:
            raise failure(bad)
        lines.append(f"no GUI session for {domain}; trying the next domain")
    lines.append(f"logs: {job.log_dir}/llamad.out.log and llamad.err.log")
    return lines


def uninstall(opts: Options) -> list[str]:
    """Boot the job out wherever it is loaded, then remove the plist."""
    job = job_for(opts)
    lines = []
    if (loaded := loaded_in(job.domains, job.label)) is not None:
        bootout(loaded[0], job.label, running_pid(loaded[1]), exit_timeout(job))
        lines.append(f"unloaded {job.label} from {loaded[0]}")
    if job.plist.exists():
        try:
            job.plist.unlink()
        except OSError as exc:
            raise ServiceError(f"cannot remove {job.plist}: {exc.strerror or exc}") from None
        lines.append(f"removed {job.plist}")
    return lines or [f"{job.label} is not installed"]


def restart(opts: Options) -> list[str]:
    """Stop llamad gracefully (SIGTERM, then wait for its exit), then `kickstart` it.

    Not `kickstart -k`: that kills the job with SIGKILL, so no slot is saved and every
    stream is cut. A clean exit stays down under `KeepAlive = {SuccessfulExit = false}`,
    so the kickstart is what starts it again.
    """
    job = job_for(opts)
    if (loaded := loaded_in(job.domains, job.label)) is None:
        raise ServiceError(f"{job.label} is not loaded; run: llamactl service install")
    domain, pid = loaded[0], running_pid(loaded[1])
    if pid is not None:
        stop(domain, job.label, pid, exit_timeout(job))
    run_tool(["launchctl", "kickstart", f"{domain}/{job.label}"])
    was = f" (pid {pid} stopped)" if pid is not None else ""
    return [f"restarted {job.label} in {domain}{was}"]


def exit_timeout(job: Job) -> float:
    """The installed plist's ExitTimeOut: how long launchd lets the job stop after SIGTERM."""
    try:
        with job.plist.open("rb") as fh:
            value = plistlib.load(fh).get("ExitTimeOut")
    except (OSError, plistlib.InvalidFileException, ValueError, AttributeError):
        return LAUNCHD_EXIT_TIMEOUT
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return LAUNCHD_EXIT_TIMEOUT


def status(opts: Options) -> tuple[int, str]:
    """(0, line) when running, else (3, line): loaded or not, the domain, state and pid,
    and the config problem llamad last reported when that is why it does not serve."""
    job = job_for(opts)
    if (loaded := loaded_in(job.domains, job.label)) is None:
        return 3, f"{job.label}: not loaded"
    domain, fields = loaded[0], parse_print(loaded[1])
    state = fields.get("state", "unknown")
    line = f"{job.label}: loaded in {domain}, state {state}"
    if "pid" in fields:
        line += f", pid {fields['pid']}"
    elif "last exit code" in fields:
        line += f", last exit code {fields['last exit code']}"
    problem = config_problem(job.log_dir / ERR_LOG)
    if problem is not None and (problem.waiting or state != "running"):
        wait = "; waiting for the config to change" if problem.waiting else ""
        return 3, f"{line}; bad config: {problem.line}{wait}"
    return (0 if state == "running" else 3), line


def _passwd(user: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(user)
    except KeyError:
        return None
