"""`llamactl cache` lists what a stop saved, per model, and `cache clear` removes it."""

from __future__ import annotations

from pathlib import Path

import httpx
from helpers import Llamad, free_port, write_config


def test_cache_lists_and_clears(tmp_path: Path, tiny_model: Path) -> None:
    """A stop saves the slot that holds a prompt; the listing names it; clear removes it."""
    port = free_port()
    table = {"model": tiny_model, "port": port, "ctx_size": 512, "n_parallel": 1}
    cfg = write_config(
        tmp_path / "llamad.toml", {"m": table}, daemon={"state_dir": str(tmp_path / "state")}
    )
    with Llamad(cfg) as d:
        d.wait_ready()
        d.wait_running("m")
        body = {"prompt": "hello there " * 10, "n_predict": 2}
        httpx.post(f"http://127.0.0.1:{port}/completion", json=body, timeout=30)
        assert d.ctl("stop", "m").returncode == 0
        d.wait_event("cache.saved", instance="m")
        listing = d.ctl("cache")
        assert listing.returncode == 0, listing.stderr
        rows = listing.stdout.splitlines()
        assert rows[0].split() == ["MODEL", "SLOT", "TOKENS", "SIZE", "AGE"]
        assert rows[1].split()[:2] == ["m", "0"]
        assert str(tmp_path / "state" / "prompt-cache") in rows[-1]
        cleared = d.ctl("cache", "clear", "m")
        assert cleared.stdout.startswith("removed 1 saved slots")
        assert d.api("GET", "/v1/cache")["saved"] == []
        assert d.ctl("cache", "bogus").returncode == 2
        assert d.stop() == 0
