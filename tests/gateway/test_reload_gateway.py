"""A reload under traffic: new models answer at once, removed ones after their requests."""

from __future__ import annotations

import tomllib
from pathlib import Path

import httpx
from gateway_helpers import LONG, TINY, chat, gateway
from helpers import free_port, toml_value
from test_eviction import _Stream


def test_reload_adds_and_removes_models_under_traffic(tiny_model: Path) -> None:
    with gateway(tiny_model, {"a": TINY, "b": LONG}) as gw:
        config = gw.ld.config
        stream = _Stream(gw, "b", 150)
        stream.start()
        assert stream.started.wait(30)
        doc = tomllib.loads(config.read_text())
        del doc["instances"]["b"]
        doc["instances"]["c"] = {"model": str(tiny_model), "port": free_port(), **TINY}
        config.write_text(_toml(doc))
        # b's stream is never cut: the reload waits for it before stopping b.
        gw.ld.wait_event("config.reloaded", timeout=30)
        stream.join(30)
        assert stream.final.get("tokens_predicted") == 150
        url = f"{gw.base}/v1/chat/completions"
        assert httpx.post(url, json=chat("b")).status_code == 404
        assert httpx.post(url, json=chat("c"), timeout=30).status_code == 200
        # An invalid file changes nothing: the gateway keeps serving.
        config.write_text(config.read_text() + "\n[instances.c]\nbroken = \n")
        gw.ld.wait_event("config.rejected", timeout=10)
        assert httpx.post(url, json=chat("a")).status_code == 200
        assert sorted(gw.models()) == ["a", "c"]


def _toml(doc: dict[str, dict[str, dict[str, object]]]) -> str:
    out = []
    for table, values in doc.items():
        if table == "instances":
            continue
        out.append(f"[{table}]")
        out += [f"{k} = {toml_value(v)}" for k, v in values.items()]
    for name, keys in doc["instances"].items():
        out.append(f"[instances.{name}]")
        out += [f"{k} = {toml_value(v)}" for k, v in keys.items()]
    return "\n".join(out) + "\n"
