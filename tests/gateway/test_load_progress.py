"""Load progress: estimated from the model's earlier loads, shown while it loads."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from gateway_helpers import TINY, chat, follow_events, gateway
from helpers import stand_in_binary, wait_for

from llamad.gateway.admission.progress import LoadProgress

pytestmark = pytest.mark.timeout(60)


def test_estimates_from_earlier_loads_per_gb() -> None:
    p = LoadProgress()
    p.observe("a", True, False, 2_000_000_000, now=0.0)
    first = p.of("a", None, now=1.0)
    assert first == {"elapsed_s": 1.0, "expected_s": None, "fraction": None, "basis": None}
    p.observe("a", False, True, 2_000_000_000, now=4.0)  # 4 s for 2 GB: 2 s per GB
    assert p.of("a", None, 5.0) is None
    p.observe("a", True, False, 2_000_000_000, now=10.0)
    assert p.of("a", None, now=11.0) == {
        "elapsed_s": 1.0, "expected_s": 4.0, "fraction": 0.25, "basis": "this model",
    }  # fmt: skip
    assert p.of("a", None, now=30.0)["fraction"] == 0.99  # type: ignore[index]
    p.observe("b", True, False, 1_000_000_000, now=0.0)  # another model: the others' rate
    assert p.of("b", None, now=1.0)["basis"] == "other models"  # type: ignore[index]
    p.observe("a", False, False, None, now=12.0)  # a failed load teaches nothing
    p.observe("a", True, False, 2_000_000_000, now=20.0)
    assert p.of("a", None, now=21.0)["expected_s"] == 4.0  # type: ignore[index]


def test_a_loading_model_shows_its_progress(
    tiny_model: Path, llama_server: Path, tmp_path: Path
) -> None:
    binary = tmp_path / "llama-server"
    stand_in_binary(binary, llama_server, serve=f'sleep 2\nexec "{llama_server}" "$@"')
    slow = {**TINY, "on_demand": True}
    with gateway(tiny_model, {"slow": slow}, daemon={"llama_server": str(binary)}) as gw:
        httpx.post(f"{gw.base}/v1/chat/completions", json=chat("slow", 1), timeout=20)
        assert gw.ld.ctl("unload", "slow").returncode == 0
        second = threading.Thread(
            target=lambda: httpx.post(
                f"{gw.base}/v1/chat/completions", json=chat("slow", 1), timeout=20
            )
        )
        loaded = lambda kinds: ("load", "loaded") in kinds  # noqa: E731
        with follow_events(gw.base, loaded) as seen, _joined(second):
            p = wait_for(
                lambda: gw.models()["slow"]["llamad"]["load_progress"],
                5,
                "progress in /v1/models",
            )
            assert p["basis"] == "this model"
            assert p["expected_s"] > 1.5
            assert 0 <= p["fraction"] < 1
            status = gw.ld.ctl("status").stdout
            assert "slow: loading " in status
            assert "% (" in status
        assert gw.models()["slow"]["llamad"]["load_progress"] is None
        # /v1/events told of it as it went.
        progress = [e for e in seen if e["type"] == "progress"]
        assert progress
        assert all(e["model"] == "slow" and e["basis"] == "this model" for e in progress)
        assert all(0 <= e["fraction"] < 1 for e in progress)


@contextmanager
def _joined(thread: threading.Thread) -> Iterator[None]:
    thread.start()
    try:
        yield
    finally:
        thread.join(20)
