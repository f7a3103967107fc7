"""`GET /ready`, the readiness a load balancer asks: "starting" until the instances
launched at start have settled, "ready", then "stopping" from SIGTERM on, while
`/health` (liveness) and every route are still served for `shutdown_delay`."""

from __future__ import annotations

import signal
from pathlib import Path

import httpx
import pytest
from helpers import FAKE_SERVER, Llamad, free_port, short_dir, wait_for, write_config

pytestmark = pytest.mark.timeout(90)


def get(base: str, path: str) -> tuple[int, dict[str, object]] | None:
    try:
        # A new connection each time, as a probe makes.
        r = httpx.get(f"{base}{path}", timeout=2, headers={"connection": "close"})
    except httpx.HTTPError:
        return None
    return r.status_code, r.json()


def test_ready_tells_starting_ready_then_stopping(tiny_model: Path, llama_server: Path) -> None:
    d = short_dir()
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    cfg = write_config(
        d / "llamad.toml",
        # The fake server's slow load: the instance is starting while the gateway serves.
        {"m": {"model": tiny_model, "port": free_port(), "env": {"FAKE_LOAD_SECONDS": 3}}},
        daemon={"state_dir": str(d / "state"), "llama_server": str(FAKE_SERVER)},
        supervise={"health_interval": 0.2},
        gateway={"listen": f"127.0.0.1:{port}", "shutdown_delay": 3.0},
    )
    with Llamad(cfg, {"FAKE_REAL_SERVER": str(llama_server)}) as ld:
        first = wait_for(lambda: get(base, "/ready"), 15, "the gateway answering")
        assert first == (503, {"status": "starting"})
        assert ld.running("m") is None
        wait_for(lambda: get(base, "/ready") == (200, {"status": "ready"}), 15, "ready")
        ld.proc.send_signal(signal.SIGTERM)
        stopping = (503, {"status": "stopping"})
        wait_for(lambda: get(base, "/ready") == stopping, 5, "stopping")
        # Still served meanwhile, on new connections: liveness and the routes alike.
        assert get(base, "/health") == (200, {"status": "ok"})
        models = get(base, "/v1/models")
        assert models is not None
        assert models[0] == 200
        assert ld.proc.wait(30) == 0
        assert len(ld.events("gateway.stopping", delay_s=3.0)) == 1
