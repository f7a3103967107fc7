"""An instance killed by SIGKILL (the OOM killer, or a person) is logged at warning."""

from __future__ import annotations

import os
import signal
from pathlib import Path

from helpers import Llamad, free_port, write_config


def test_sigkilled_instance_exit_is_a_warning(tmp_path: Path, tiny_model: Path) -> None:
    cfg = write_config(
        tmp_path / "llamad.toml",
        {"a": {"model": tiny_model, "port": free_port()}},
        daemon={"state_dir": str(tmp_path / "state")},
        supervise={"health_interval": 0.2, "backoff_initial": 0.1},
    )
    with Llamad(cfg) as d:
        pid = d.wait_running("a")
        os.kill(pid, signal.SIGKILL)
        again = d.wait_running("a", not_pid=pid)
        d.ctl("stop", "a")
        assert d.stop() == 0
    levels = {e["pid"]: (e["signal"], e["level"]) for e in d.events("instance.exited")}
    assert levels[pid] == ("SIGKILL", "warning")
    assert levels[again][1] == "info"  # stopped with SIGTERM: news, not a warning
