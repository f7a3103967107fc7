"""A cluster is not a home: the fleet's asks are conditional (`GET /v1/fleet` with the
last ETag, 304 while nothing changed), and a peer that keeps not changing is asked less
often; a miss still asks every peer, and an older llamad is asked its whole status."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from fleet_helpers import TINY, Host, peer_tables, start, toml
from helpers import free_port, short_dir
from peer_stand_in import serving
from remote_helpers import ADMIN, READ
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from llamad.api.conditional import conditional_json
from llamad.fleet.table import Peer
from llamad.gateway.fleet import models as fleet_models
from llamad.gateway.fleet.models import FleetModels


class Changing:
    """A peer's control API whose document the test changes; it counts every ask."""

    def __init__(self, legacy: bool = False) -> None:
        self.asks: Counter[tuple[str, int]] = Counter()
        self.models = ["m1"]
        self.legacy = legacy  # an older llamad: /v1/status only

    def doc(self) -> dict[str, Any]:
        gateway = {"routable": True, "aliases": [], "slots": 1}
        return {
            "daemon": {"pid": 7, "started_at": "t", "config_path": "/p", "version": "0"},
            "instances": [{"name": m, "state": "running", "gateway": gateway} for m in self.models],
            "gateway": {"listen": "127.0.0.1:9", "left_bytes": 1 << 30, "devices": []},
        }

    async def fleet(self, request: Request) -> Response:
        answer = conditional_json(request, self.doc())
        self.asks[("/v1/fleet", answer.status_code)] += 1
        return answer

    async def status(self, request: Request) -> Response:
        self.asks[("/v1/status", 200)] += 1
        return JSONResponse(self.doc())

    def app(self) -> Starlette:
        routes = [Route("/v1/status", self.status)]
        if not self.legacy:
            routes.append(Route("/v1/fleet", self.fleet))
        return Starlette(routes=routes)


@contextmanager
def peer(legacy: bool = False) -> Iterator[tuple[Changing, FleetModels]]:
    """A changing peer, served on loopback, and a FleetModels asking it as `b`."""
    changing, port = Changing(legacy), free_port()
    with serving(changing.app(), "127.0.0.1", port):
        found = {"b": Peer("b", f"http://127.0.0.1:{port}")}

        async def peers() -> dict[str, Peer]:
            return found

        yield changing, FleetModels(peers, lambda _: False)


def _models(fleet: FleetModels) -> list[str]:
    return sorted(model.name for _, model in fleet.models())


async def test_an_unchanged_peer_answers_304_and_is_asked_less_often(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first ask is whole; then 304s, its models standing, each doubling the wait
    for its next background ask up to UNCHANGED_MAX_S; a change is read at once and
    puts it back to every REFRESH_S."""
    monkeypatch.setattr(fleet_models, "UNCHANGED_MAX_S", fleet_models.REFRESH_S * 4)
    with peer() as (changing, fleet):
        await fleet.refresh()
        assert _models(fleet) == ["m1"]
        entry = fleet.seen["b"]
        assert entry.every == fleet_models.REFRESH_S
        for every in (2, 4, 4):
            await fleet.refresh()  # a miss's round: asked whatever its turn
            assert entry.every == fleet_models.REFRESH_S * every
        assert changing.asks == {("/v1/fleet", 200): 1, ("/v1/fleet", 304): 3}
        assert _models(fleet) == ["m1"]
        await fleet.refresh(everyone=False)  # a background round: not its turn yet
        assert sum(changing.asks.values()) == 4
        entry.due = 0.0  # its turn
        changing.models = ["m1", "m2"]
        await fleet.refresh(everyone=False)
        assert changing.asks[("/v1/fleet", 200)] == 2
        assert _models(fleet) == ["m1", "m2"]
        assert entry.every == fleet_models.REFRESH_S


async def test_an_older_llamad_is_asked_its_whole_status() -> None:
    """A peer without `/v1/fleet` (404): its status document, now and from then on."""
    with peer(legacy=True) as (changing, fleet):
        for _ in range(2):
            await fleet.refresh()
        assert _models(fleet) == ["m1"]
        assert changing.asks == {("/v1/status", 200): 2}
        assert fleet.seen["b"].every == fleet_models.REFRESH_S  # its answers never match


async def test_a_peer_that_went_away_is_asked_every_round() -> None:
    """An unanswered ask leaves no wait behind: the next background round asks again."""
    with peer() as (changing, fleet):
        await fleet.refresh()
        await fleet.refresh()
        entry = fleet.seen["b"]
        fleet.mark_away("b", "gone")
        await fleet.refresh(everyone=False)
        assert changing.asks[("/v1/fleet", 304)] == 2
        assert entry.error is None


def _b(tiny_model: Path) -> Host:
    """B serving `bonly` and `both`, its memory budget a fixed size: `auto` follows the
    machine's free memory, which the other tests move by more than its steps."""
    base, gw, ctl = short_dir(), free_port(), free_port()
    tables = peer_tables(base, gw, ctl)
    tables["gateway"]["memory_budget"] = "8GiB"
    for name in ("bonly", "both"):
        tables[f"instances.{name}"] = {"model": tiny_model, "port": free_port(), **TINY}
    ld = start(base, toml(tables), gw, ["bonly", "both"])
    return Host(ld, f"http://127.0.0.1:{gw}", f"http://127.0.0.1:{ctl}", base)


def test_a_real_llamad_answers_304_until_its_models_change(tiny_model: Path) -> None:
    """`GET /v1/fleet` (read token): 200 with an ETag, then 304 to it however much
    uptimes and CPU move, and a new document once an instance stops."""
    b = _b(tiny_model)
    try:
        url, read = f"{b.control}/v1/fleet", {"Authorization": f"Bearer {READ}"}
        first = httpx.get(url, headers=read, timeout=10)
        assert first.status_code == 200
        doc, etag = first.json(), first.headers["etag"]
        assert sorted(i["name"] for i in doc["instances"]) == ["bonly", "both"]
        assert doc["gateway"]["listen"].endswith(b.gateway.rsplit(":", 1)[1])
        for _ in range(3):
            again = httpx.get(url, headers={**read, "If-None-Match": etag}, timeout=10)
            assert again.status_code == 304
            assert again.content == b""
        admin = {"Authorization": f"Bearer {ADMIN}"}
        stop = f"{b.control}/v1/instances/both/stop?wait=20"
        assert httpx.post(stop, headers=admin, timeout=30).status_code == 200
        changed = httpx.get(url, headers={**read, "If-None-Match": etag}, timeout=10)
        assert changed.status_code == 200
        assert changed.headers["etag"] != etag
        states = {i["name"]: i["state"] for i in changed.json()["instances"]}
        assert states["both"] == "stopped"
        assert b.ld.stop() == 0
    finally:
        b.ld.close()
