"""A running daemon's listeners wait for a port still held, say so in `llamactl status`,
and serve once the port is free, with no restart: the gateway and remote control alike."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import Llamad, free_port, short_dir, wait_for, write_config
from remote_helpers import ADMIN, READ, write_token


def tables(d: Path, which: str, listen: str) -> dict[str, Any]:
    daemon: dict[str, Any] = {"state_dir": str(d / "state")}
    if which == "gateway":
        return {"daemon": daemon, "gateway": {"listen": listen}}
    daemon["remote"] = {
        "listen": listen,
        "token_file": write_token(d / "admin.token", ADMIN),
        "read_token_file": write_token(d / "read.token", READ),
        "advertise": False,
    }
    return {"daemon": daemon}


@pytest.mark.parametrize(("which", "shown"), [("gateway", "gateway"), ("remote", "remote control")])
def test_a_listener_waits_for_its_port_and_serves_when_it_is_free(which: str, shown: str) -> None:
    d, port = short_dir(), free_port()
    held = socket.socket()
    held.bind(("127.0.0.1", port))
    held.listen()
    listen = f"127.0.0.1:{port}"
    with Llamad(write_config(d / "llamad.toml", {}, **tables(d, which, listen))) as ld:
        try:
            ld.wait_ready()
            ld.wait_event("listener.waiting", listener=which, error="address in use")
            line = f"{shown} waiting for {listen} (address in use), next try in"
            assert line in ld.ctl("status").stdout
            assert ld.status()["daemon"]["listeners"][which]["state"] == "waiting"
        finally:
            held.close()
        ld.wait_event(f"{which}.listening", timeout=40)

        def answer() -> int | None:
            path = "/v1/models" if which == "gateway" else "/v1/status"
            headers = {"Authorization": f"Bearer {READ}"}
            try:
                return httpx.get(f"http://{listen}{path}", headers=headers, timeout=2).status_code
            except httpx.HTTPError:
                return None

        assert wait_for(answer, 10, f"the {which} listener answering") == 200
        assert ld.status()["daemon"]["listeners"][which]["state"] == "listening"
        assert "waiting for" not in ld.ctl("status").stdout
        assert ld.stop() == 0
