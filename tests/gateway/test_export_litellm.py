"""`llamactl export litellm`: the model_list LiteLLM's proxy takes, checked by LiteLLM
itself routing requests through llamad to a real llama-server."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml
from gateway_helpers import TINY, gateway
from helpers import free_port

from bench.peer_procs import PEERS_VENV, launch, litellm_env
from bench.targets import wait_answering

KEY = "k" * 32


def _key(path: Path) -> Path:
    path.write_text(KEY + "\n")
    path.chmod(0o600)
    return path


@pytest.mark.timeout(120)
# LiteLLM's Router builds a pydantic schema of a TypedDict with ReadOnly items, which
# pydantic warns about; it is LiteLLM's, not ours.
@pytest.mark.filterwarnings("ignore:Items .* are using the `ReadOnly` qualifier:UserWarning")
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


@pytest.mark.timeout(300)
def test_litellm_proxy_serves_the_exported_list(tiny_model: Path, tmp_path: Path) -> None:
    """LiteLLM's proxy itself (`litellm --config`), given the exported list, answers a chat
    by relaying it to llamad. The proxy is in `make bench-peers`'s virtualenv, which `make
    test` builds: the test extra's litellm has no proxy (litellm[proxy] would move other
    test packages)."""
    proxy = PEERS_VENV / "bin" / "litellm"
    if not proxy.exists():
        pytest.skip(f"{proxy} not found: `make bench-peers` installs LiteLLM's proxy")
    key = str(_key(tmp_path / "gateway-key"))
    with gateway(tiny_model, {"tiny": TINY}, api_key_file=key) as gw:
        done = gw.ld.ctl("export", "litellm")
        assert done.returncode == 0, done.stderr
        config = tmp_path / "litellm.yaml"
        config.write_text(done.stdout + "litellm_settings:\n  telemetry: false\n")
        port = free_port()
        env = {**litellm_env(tmp_path), "LLAMAD_API_KEY": KEY}
        argv = [proxy, "--config", config, "--host", "127.0.0.1", "--port", str(port)]
        popen = launch(argv, tmp_path / "litellm.log", env, cwd=tmp_path)
        try:
            wait_answering(popen, port, "/health/liveliness", 240, "litellm")
            answer = httpx.post(
                f"http://127.0.0.1:{port}/v1/chat/completions",
                json={"model": "tiny", "messages": [{"role": "user", "content": "Hi"}],
                      "max_tokens": 3},
                timeout=60,
            )  # fmt: skip
            assert answer.status_code == 200, answer.text
        finally:
            popen.terminate()
            popen.wait(30)
        activity = httpx.get(f"{gw.base}/v1/activity", headers={"Authorization": f"Bearer {KEY}"})
        assert [(r["model"], r["status"]) for r in activity.json()["data"]] == [("tiny", 200)]
