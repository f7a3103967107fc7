"""`llamad --demo`: a config a newcomer can run without downloading a model."""

from __future__ import annotations

from pathlib import Path

from llamad.common import paths
from llamad.daemon.tinymodel import demo_model_path

DEMO_PORTS = (18081, 18082)


def demo_config() -> Path:
    """Write (once) the demo config beside a generated tiny model and return its path."""
    model = demo_model_path()
    home = paths.data_home()
    state = home / "demo-state"
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
    text = f"""# Written by `llamad --demo`: two instances of a generated tiny model.
[daemon]
state_dir = "{state}"

[supervise]
health_interval = 2.0
{instances}"""
    path = home / "demo.toml"
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.write_text(text, encoding="utf-8")
    return path
