"""`llamactl export litellm`: the model_list LiteLLM's proxy takes, checked by LiteLLM
itself routing requests through llamad to a real llama-server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from gateway_helpers import TINY, gateway

KEY = "k" * 32


def _key(path: Path) -> Path:
    path.write_text(KEY + "\n")
    path.chmod(0o600)
    return path


@pytest.mark.timeout(120)
def test_litellm_model_list_serves_a_request_through_llamad(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The exported model_list, read as LiteLLM's proxy reads its config (YAML, the key
    from `os.environ/`, one Router over the list), routes a chat by the model's name and
    by its alias through llamad to the real llama-server."""
    # The model price list from the package, not the network.
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm

    key = str(_key(tmp_path / "gateway-key"))
    with gateway(tiny_model, {"tiny": {**TINY, "aliases": ["small"]}}, api_key_file=key) as gw:
        done = gw.ld.ctl("export", "litellm")
        assert done.returncode == 0, done.stderr
        config = yaml.safe_load(done.stdout)
        entries = config["model_list"]
        assert [e["model_name"] for e in entries] == ["tiny", "small"]
        assert entries[0]["litellm_params"]["api_base"] == f"{gw.base}/v1"
        monkeypatch.setenv("LLAMAD_API_KEY", KEY)
        router = litellm.Router(model_list=entries)
        for name in ("tiny", "small"):
            reply: Any = router.completion(
                model=name, messages=[{"role": "user", "content": "Hi"}], max_tokens=3
            )
            assert reply.choices[0].finish_reason in ("length", "stop")
        answer = httpx.get(f"{gw.base}/v1/activity", headers={"Authorization": f"Bearer {KEY}"})
        served = [(r["model"], r["instance"], r["key"], r["status"]) for r in answer.json()["data"]]
        assert served == [("small", "tiny", "default", 200), ("tiny", "tiny", "default", 200)]
