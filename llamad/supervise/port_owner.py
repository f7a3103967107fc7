"""Who holds a TCP port: named in llamad's "port N in use by ..." messages."""

from __future__ import annotations

import shutil
import subprocess
import sys

UNKNOWN = "another process"


def port_owner(port: int, platform: str = sys.platform) -> str:
    """'pid 4242 (python3)' for the listener on `port`, or a vaguer phrase when unknown."""
    if platform == "darwin":
        # psutil's net_connections needs root on macOS; lsof names our own user's
        # listeners without it.
        return _lsof_owner(port)
    import psutil  # only when a port is taken: not on every start's way to its launches

    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):
        return UNKNOWN
    for conn in conns:
        if conn.laddr and conn.laddr.port == port and conn.status == psutil.CONN_LISTEN:
            if conn.pid is None:
                return UNKNOWN
            try:
                return f"pid {conn.pid} ({psutil.Process(conn.pid).name()})"
            except psutil.Error:
                return f"pid {conn.pid}"
    return UNKNOWN


def _lsof_owner(port: int) -> str:
    lsof = shutil.which("lsof")
    if lsof is None:
        return UNKNOWN
    argv = [lsof, "-nP", f"-iTCP:{port}", "-sTCP:LISTEN", "-Fpc"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return UNKNOWN
    # -F output: one field per line, `p<pid>` then `c<command>` for each process.
    fields = [(line[:1], line[1:]) for line in out.splitlines() if line]
    pid = next((v for k, v in fields if k == "p"), None)
    name = next((v for k, v in fields if k == "c"), None)
    if pid is None:
        return UNKNOWN
    return f"pid {pid} ({name})" if name else f"pid {pid}"
