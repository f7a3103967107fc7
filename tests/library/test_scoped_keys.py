"""A gateway key limited to some models may not change the library (red team F1): its
`DELETE /api/delete` and `POST /api/pull` are 403 in Ollama's shape, and nothing is
deleted or pulled; the main key's same requests are served."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import free_port
from remote_helpers import write_token

pytestmark = pytest.mark.timeout(120)

MAIN, ALICE = "main-secret-0123456789", "alice-secret-0123456789"
REFUSED = {
    "error": "the key 'alice' is limited to some models: it may not change the library,"
    " nor a model's slots or adapters"
}


@pytest.fixture
def gateway_extra(tmp_path: Path, tiny_model: Path) -> str:
    main = write_token(tmp_path / "main.key", MAIN)
    alice = write_token(tmp_path / "alice.key", ALICE)
    return (
        f'api_key_file = "{main}"\n'
        f'[gateway.keys.alice]\nkey_file = "{alice}"\nmodels = ["mine"]\n'
        f'[instances.mine]\nmodel = "{tiny_model}"\nport = {free_port()}\non_demand = true\n'
    )


def _names(ld: Any) -> set[str]:
    return {m["name"] for m in ld.api("GET", "/v1/library")["models"]}


def test_a_limited_key_neither_deletes_nor_pulls(daemon: Any) -> None:
    ld, base, _cache = daemon
    main, alice = {"x-api-key": MAIN}, {"Authorization": f"Bearer {ALICE}"}
    pulled = httpx.post(
        f"{base}/api/pull", json={"model": "tinyllama:1b", "stream": False}, headers=main
    )
    assert pulled.status_code == 200, pulled.text
    assert "tinyllama:1b" in _names(ld)

    gone = httpx.request(
        "DELETE", f"{base}/api/delete", json={"model": "tinyllama:1b"}, headers=alice
    )
    assert gone.status_code == 403, gone.text
    assert gone.json() == REFUSED
    assert "tinyllama:1b" in _names(ld)  # still there, and still served
    served = httpx.post(f"{base}/api/show", json={"model": "tinyllama:1b"}, headers=main)
    assert served.status_code == 200

    pull = httpx.post(f"{base}/api/pull", json={"model": "someone/Tiny-GGUF"}, headers=alice)
    assert pull.status_code == 403, pull.text
    assert pull.json() == REFUSED
    assert len(ld.events("library.pull_started")) == 1  # the main key's alone

    deleted = httpx.request(
        "DELETE", f"{base}/api/delete", json={"model": "tinyllama:1b"}, headers=main
    )
    assert deleted.status_code == 200
    assert "tinyllama:1b" not in _names(ld)
