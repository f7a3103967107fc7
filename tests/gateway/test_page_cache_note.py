"""The page's status document, in process: a model's cache figures and, once its
restores stopped the saves, their reason as the note under its name."""

from __future__ import annotations

from typing import Any

import pytest
from supervisor_double import Double, spec

from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.contract.caller import ANYONE
from llamad.gateway.core import Gateway
from llamad.gateway.page.status import status
from llamad.lifecycle.states import State

pytestmark = pytest.mark.timeout(10)

STOPPED = "2 restore(s) in a row reused nothing"


def _figures(name: str) -> dict[str, Any] | None:
    if name != "m":
        return None
    restores = {"restores": 2, "hits": 0, "misses": 2, "tokens_saved": 0, "stopped": STOPPED}
    return {"kept": False, "note": STOPPED, "bytes": 0, "restores": restores}


async def test_the_stop_reason_is_the_note_and_the_figures_go_with_it() -> None:
    double = Double()
    for name in ("m", "n"):
        double.add(spec(name, on_demand=False), State.RUNNING)
    cfg = GatewayConfig(host="127.0.0.1", port=0, memory_budget=None)
    gw = Gateway(double, lambda: cfg)
    models = {m["id"]: m for m in status(gw, ANYONE, _figures)["models"]}
    assert models["m"]["cache_note"] == STOPPED
    assert models["m"]["cache"]["restores"]["misses"] == 2
    assert models["n"]["cache_note"] is None
    assert models["n"]["cache"] is None
    await gw.close()
