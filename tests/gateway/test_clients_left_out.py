"""What clients ask that llama-server leaves out, on the tiny model: Ollama's tagged
names on every route, `think` for a model that cannot think, `echo`, `n` > 1
(docs/clients.md names these tests in its rows)."""

from __future__ import annotations

from pathlib import Path

import anthropic
import httpx
import ollama
import openai
import pytest
from gateway_helpers import TINY, gateway

pytestmark = pytest.mark.timeout(120)

HI = [{"role": "user", "content": "hi"}]
INSTANCES = {
    "tiny": {**TINY, "n_parallel": 2, "ctx_size": 512},
    "emb": {**TINY, "embeddings": True, "pooling": "mean", "on_demand": True},
}
ALICE = "alice-secret-0123456789"


def _key(path: Path, secret: str) -> str:
    path.write_text(secret + "\n")
    path.chmod(0o600)
    return str(path)


def test_tagged_names_resolve_on_every_route(tiny_model: Path, tmp_path: Path) -> None:
    """`tiny:latest`, as /api/tags lists it, works on the five OpenAI and Anthropic routes
    and Ollama's, for a key limited to `tiny`; each answer names the model as asked."""
    keys = {"alice": {"key_file": _key(tmp_path / "alice.key", ALICE), "models": ["tiny", "emb"]}}
    main = _key(tmp_path / "main.key", "main-secret-0123456789")
    with (
        gateway(tiny_model, INSTANCES, api_key_file=main, keys=keys) as gw,
        openai.OpenAI(base_url=f"{gw.base}/v1", api_key=ALICE, max_retries=0, timeout=60) as c,
        anthropic.Anthropic(base_url=gw.base, api_key=ALICE, max_retries=0, timeout=60) as a,
        ollama.Client(host=gw.base, headers={"Authorization": f"Bearer {ALICE}"}) as o,
    ):
        name = "tiny:latest"
        chat = c.chat.completions.create(model=name, messages=HI, max_tokens=2)  # type: ignore[arg-type]
        assert chat.model == name
        done = c.completions.create(model=name, prompt="hi", max_tokens=2)
        assert done.model == name
        answer = c.responses.create(model=name, input="hi", max_output_tokens=2)
        assert answer.model == name
        got = c.embeddings.create(model="emb:latest", input="a")
        assert got.model == "emb:latest"
        assert len(got.data) == 1
        message = a.messages.create(model=name, max_tokens=2, messages=HI)  # type: ignore[arg-type]
        assert message.model == name
        assert o.chat(model=name, messages=HI, options={"num_predict": 2}).model == name
        with pytest.raises(openai.NotFoundError):
            c.chat.completions.create(model="nope:latest", messages=HI, max_tokens=1)  # type: ignore[arg-type]
        refused = httpx.post(
            f"{gw.base}/v1/chat/completions",
            json={"model": "tiny:other", "messages": HI, "max_tokens": 1},
            headers={"Authorization": f"Bearer {ALICE}"},
            timeout=10,
        )
        assert refused.status_code == 404  # only the tag the listing shows
