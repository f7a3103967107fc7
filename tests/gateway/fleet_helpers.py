"""Two real daemons on loopback for the gateway's fleet: B serves models behind a keyed
gateway and its control API on TCP; each test builds its own A to route to B."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from helpers import Llamad, free_port, short_dir, toml_value, wait_for
from remote_helpers import ADMIN, READ, write_token

GW_KEY_B = "gateway-key-of-b-" + "c" * 20
TINY = {"ctx_size": 256, "n_parallel": 1}
EMBED = {**TINY, "embeddings": True, "pooling": "mean", "on_demand": True, "aliases": ["b-embed"]}


@dataclass
class Host:
    """A daemon with its gateway's URL (and, for B, its control API's)."""

    ld: Llamad
    gateway: str  # http://127.0.0.1:PORT
    control: str | None = None  # B's control API on TCP
    dir: Path = Path()

    @property
    def control_port(self) -> int:
        """The port of the control API on TCP."""
        assert self.control is not None
        return int(self.control.rsplit(":", 1)[1])

    def models(self) -> dict[str, dict[str, Any]]:
        """The gateway's `/v1/models`, by id."""
        data = httpx.get(f"{self.gateway}/v1/models", timeout=5).json()["data"]
        return {m["id"]: m for m in data}


def toml(tables: dict[str, dict[str, object]], peers: list[dict[str, object]] = ()) -> str:
    """A config file: each table's keys, then one `[[fleet.peers]]` per entry of `peers`."""
    out = []
    for name, keys in tables.items():
        out.append(f"[{name}]")
        out += [f"{k} = {toml_value(v)}" for k, v in keys.items()]
    for peer in peers:
        out.append("[[fleet.peers]]")
        out += [f"{k} = {toml_value(v)}" for k, v in peer.items()]
    return "\n".join(out) + "\n"


def start(
    base: Path,
    text: str,
    gateway_port: int,
    always_on: list[str],
    env: dict[str, str] | None = None,
    host: str = "127.0.0.1",
) -> Llamad:
    """A daemon on `text`, once its gateway (on `host`) answers and `always_on` run."""
    path = base / "llamad.toml"
    path.write_text(text)
    ld = Llamad(path, env=env)
    try:
        ld.wait_ready()
        ld.wait_event("gateway.listening")
        for name in always_on:
            ld.wait_running(name, timeout=20)
        url = f"http://{host}:{gateway_port}/health"
        wait_for(lambda: _answers(url), 10, "the gateway answering")
    except BaseException:
        ld.close()
        raise
    return ld


def _answers(url: str) -> bool:
    try:
        return httpx.get(url, timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def peer_tables(
    base: Path, gateway: int, control: int, advertise: bool = False, host: str = "127.0.0.1"
) -> dict[str, dict[str, object]]:
    """A peer's own tables: its state dir, control on TCP (on `host`) with the read token
    READ, and a gateway wanting GW_KEY_B."""
    return {
        "daemon": {"state_dir": base / "state"},
        "daemon.remote": {
            "listen": f"{host}:{control}",
            "token_file": write_token(base / "admin.token", ADMIN),
            "read_token_file": write_token(base / "read.token", READ),
            "advertise": advertise,
        },
        "gateway": {
            "listen": f"{host}:{gateway}",
            "api_key_file": write_token(base / "gw.key", GW_KEY_B),
        },
    }


def start_b(tiny_model: Path, advertise: bool = False, embeddings: bool = False) -> Host:
    """B: `bonly` (alias `b-mini`) and `both` behind its gateway (with a key), control on
    TCP with the read token READ, advertised over mDNS on loopback when `advertise`; with
    `embeddings`, an on-demand embedding instance `bemb` (alias `b-embed`) too."""
    b_dir = short_dir()
    b_gw, b_ctl = free_port(), free_port()
    text = toml(
        {
            **peer_tables(b_dir, b_gw, b_ctl, advertise),
            "instances.bonly": {
                "model": tiny_model,
                "port": free_port(),
                **TINY,
                "context_shift": True,  # lets the tiny model write past its context
                "aliases": ["b-mini"],
            },
            "instances.both": {"model": tiny_model, "port": free_port(), **TINY},
            **(
                {"instances.bemb": {**EMBED, "model": tiny_model, "port": free_port()}}
                if embeddings
                else {}
            ),
        }
    )
    ld = start(b_dir, text, b_gw, ["bonly", "both"])
    return Host(ld, f"http://127.0.0.1:{b_gw}", f"http://127.0.0.1:{b_ctl}", b_dir)


def start_a(
    tiny_model: Path,
    fleet: dict[str, object],
    peers: list[dict[str, object]] = (),
    env: dict[str, str] | None = None,
    **tables: dict[str, object],
) -> Host:
    """A: `both` of its own, a gateway with `fleet = true`, and `[fleet]` as given."""
    a_dir, a_gw = short_dir(), free_port()
    text = toml(
        {
            "daemon": {"state_dir": a_dir / "state"},
            "gateway": {"listen": f"127.0.0.1:{a_gw}", "fleet": True},
            "instances.both": {"model": tiny_model, "port": free_port(), **TINY},
            **tables,
            **({"fleet": fleet} if fleet else {}),
        },
        peers,
    )
    ld = start(a_dir, text, a_gw, ["both"], env)
    return Host(ld, f"http://127.0.0.1:{a_gw}", dir=a_dir)


def peer_entry(name: str, control: str, keys: Path) -> dict[str, object]:
    """A `[[fleet.peers]]` entry for a peer at `control` with READ and GW_KEY_B, their
    files written in `keys`."""
    return {
        "name": name,
        "url": control,
        "token_file": write_token(keys / f"{name}-read.token", READ),
        "gateway_key_file": write_token(keys / f"{name}-gw.key", GW_KEY_B),
    }


@contextmanager
def a_routing_to_b(tiny_model: Path, embeddings: bool = False) -> Iterator[tuple[Host, Host]]:
    """B serves `bonly` and `both` behind its gateway (with a key) and control on TCP;
    A serves `both` itself and routes the rest to B, a `[fleet]` peer."""
    b = start_b(tiny_model, embeddings=embeddings)
    try:
        keys = b.dir / "a-keys"
        keys.mkdir()
        assert b.control is not None
        a = start_a(tiny_model, {}, [peer_entry("b", b.control, keys)])
        try:
            yield a, b
            assert a.ld.stop() == 0
        finally:
            a.ld.close()
    finally:
        b.ld.close()
