"""`llamactl service` on macOS: a LaunchAgent, or with --system a LaunchDaemon.

The plist is `templates/llamad.plist`, the only copy (launchd/README.md points here);
its comments explain the KeepAlive, ThrottleInterval, ProcessType and ExitTimeOut choices.
"""

from __future__ import annotations

import os
import plistlib
import pwd
import re
import subprocess
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from string import Template
from xml.parsers.expat import ExpatError
from xml.sax.saxutils import escape

from llamad.service.common import (
    DEFAULT_LABEL,
    InstallOptions,
    Options,
    ServiceError,
    failure,
    run_tool,
    stop_timeout_seconds,
)

# Read at call time, so tests can point it at a temporary directory.
SYSTEM_DIR = Path("/Library/LaunchDaemons")
# launchd gives jobs a bare PATH; Homebrew on Apple silicon lives in /opt/homebrew.
BASE_PATH = "/opt/homebrew/bin:/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"
# `launchctl bootstrap gui/UID` over SSH: "Domain does not support specified action".
NO_GUI_SESSION = 125
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


@dataclass(frozen=True)
class Job:
    """Where one job lives: its plist, its logs and the launchd domains to try, in order."""

    label: str
    plist: Path
    log_dir: Path
    domains: tuple[str, ...]
    user_name: str | None = None


def job_for(opts: Options) -> Job:
    """A LaunchAgent in ~/Library/LaunchAgents, or with `system` a LaunchDaemon for the user."""
    label = opts.label or DEFAULT_LABEL
    if not _LABEL.fullmatch(label):
        raise ServiceError(f"bad label {label!r}: use letters, digits, '.', '-' and '_'", 2)
    if opts.system:
        user, home = _invoking_user(opts.home)
        logs = home / "Library" / "Logs" / "llamad"
        return Job(label, SYSTEM_DIR / f"{label}.plist", logs, ("system",), user)
    uid, home = os.getuid(), opts.home
    plist = home / "Library" / "LaunchAgents" / f"{label}.plist"
    # gui/ needs a login at the screen; user/ exists even for an SSH-only session.
    return Job(label, plist, home / "Library" / "Logs" / "llamad", (f"gui/{uid}", f"user/{uid}"))


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
    values = {
        "label": job.label,
        "llamad": str(opts.llamad),
        "config": str(opts.config),
        "path": path,
        "exit_timeout": str(stop_timeout_seconds(opts.stop_budget)),
        "stdout_path": str(job.log_dir / "llamad.out.log"),
        "stderr_path": str(job.log_dir / "llamad.err.log"),
    }
    user = job.user_name
    entry = f"  <key>UserName</key>\n  <string>{escape(user)}</string>\n" if user else ""
    template = resources.files("llamad").joinpath("templates/llamad.plist").read_text("utf-8")
    text = Template(template).substitute({k: escape(v) for k, v in values.items()}, user_name=entry)
    try:  # A path with control characters would make an unloadable plist; say so now.
        plistlib.loads(text.encode())
    except (ExpatError, ValueError) as exc:
        raise ServiceError(f"cannot render a valid plist: {exc}") from None
    return text


def install(opts: InstallOptions) -> list[str]:
    """Write the plist (0644) and load it: enable + bootstrap, gui/ then user/ without a GUI."""
    job, text = job_for(opts), render(opts)
    loaded = _loaded(job)
    if loaded is not None or job.plist.exists():
        # A loaded job keeps its old definition until booted out; bootstrap would fail (5).
        _bootout(job, loaded[0] if loaded else job.domains[0])
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
        bad = _load(job, domain)
        if bad is None:
            lines.append(f"loaded {job.label} in {domain}")
            break
        no_gui = bad.returncode == NO_GUI_SESSION or "does not support" in bad.stderr
        if domain == job.domains[-1] or not no_gui:
            raise failure(bad)
        lines.append(f"no GUI session for {domain}; trying the next domain")
    lines.append(f"logs: {job.log_dir}/llamad.out.log and llamad.err.log")
    return lines


def _load(job: Job, domain: str) -> subprocess.CompletedProcess[str] | None:
    # The first failed call, or None once loaded. Enable first: a disabled job won't bootstrap.
    for argv in (
        ["launchctl", "enable", f"{domain}/{job.label}"],
        ["launchctl", "bootstrap", domain, str(job.plist)],
    ):
        result = run_tool(argv, check=False)
        if result.returncode != 0:
            return result
    return None


def uninstall(opts: Options) -> list[str]:
    """Boot the job out wherever it is loaded, then remove the plist."""
    job = job_for(opts)
    lines = []
    if (loaded := _loaded(job)) is not None:
        _bootout(job, loaded[0])
        lines.append(f"unloaded {job.label} from {loaded[0]}")
    if job.plist.exists():
        try:
            job.plist.unlink()
        except OSError as exc:
            raise ServiceError(f"cannot remove {job.plist}: {exc.strerror or exc}") from None
        lines.append(f"removed {job.plist}")
    return lines or [f"{job.label} is not installed"]


def restart(opts: Options) -> list[str]:
    """`launchctl kickstart -k`: kill the running llamad and start it again at once."""
    job = job_for(opts)
    if (loaded := _loaded(job)) is None:
        raise ServiceError(f"{job.label} is not loaded; run: llamactl service install")
    run_tool(["launchctl", "kickstart", "-k", f"{loaded[0]}/{job.label}"])
    return [f"restarted {job.label} in {loaded[0]}"]


def status(opts: Options) -> tuple[int, str]:
    """(0, line) when running, else (3, line): loaded or not, the domain, state and pid."""
    job = job_for(opts)
    if (loaded := _loaded(job)) is None:
        return 3, f"{job.label}: not loaded"
    domain, fields = loaded[0], parse_print(loaded[1])
    state = fields.get("state", "unknown")
    line = f"{job.label}: loaded in {domain}, state {state}"
    if "pid" in fields:
        line += f", pid {fields['pid']}"
    elif "last exit code" in fields:
        line += f", last exit code {fields['last exit code']}"
    return (0 if state == "running" else 3), line


def parse_print(text: str) -> dict[str, str]:
    """The top-level `key = value` lines of `launchctl print`; nested blocks are skipped."""
    fields: dict[str, str] = {}
    depth = 0
    for raw in text.splitlines():
        line = raw.strip()
        if line.endswith("{"):
            depth += 1
        elif line.startswith("}"):
            depth -= 1
        elif depth == 1 and " = " in line:
            key, _, value = line.partition(" = ")
            fields.setdefault(key, value)
    return fields


def _loaded(job: Job) -> tuple[str, str] | None:
    """(domain, `launchctl print` output) for the first domain that has the job loaded."""
    for domain in job.domains:
        result = run_tool(["launchctl", "print", f"{domain}/{job.label}"], check=False)
        if result.returncode == 0:
            return domain, result.stdout
    return None


def _bootout(job: Job, domain: str) -> None:
    result = run_tool(["launchctl", "bootout", f"{domain}/{job.label}"], check=False)
    # 3 "No such process" / 113 "Could not find specified service": already gone, fine.
    if result.returncode not in (0, 3, 113):
        raise failure(result)


def _passwd(user: str) -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(user)
    except KeyError:
        return None
