"""The gateway of a running daemon waits for a port still held, says so in `llamactl
status`, and serves once the port is free, with no restart."""

from __future__ import annotations

import socket

import httpx
from helpers import Llamad, free_port, short_dir, wait_for, write_config


def test_the_gateway_waits_for_its_port_and_serves_when_it_is_free() -> None:
    d, port = short_dir(), free_port()
    held = socket.socket()
    held.bind(("127.0.0.1", port))
    held.listen()
    cfg = write_config(
        d / "llamad.toml",
        {},
        daemon={"state_dir": str(d / "state")},
        gateway={"listen": f"127.0.0.1:{port}"},
    )
    with Llamad(cfg) as ld:
        try:
            ld.wait_ready()
            ld.wait_event("listener.waiting", listener="gateway", error="address in use")
            shown = ld.ctl("status").stdout
            assert f"gateway waiting for 127.0.0.1:{port} (address in use), next try in" in shown
            listeners = ld.status()["daemon"]["listeners"]
            assert listeners["gateway"]["state"] == "waiting"
        finally:
            held.close()
        ld.wait_event("gateway.listening", timeout=40)

        def models() -> int | None:
            try:
                return httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=2).status_code
            except httpx.HTTPError:
                return None

        assert wait_for(models, 10, "the gateway answering") == 200
        assert ld.status()["daemon"]["listeners"]["gateway"]["state"] == "listening"
        assert "waiting for" not in ld.ctl("status").stdout
        assert ld.stop() == 0
