"""Frameworks on top of the clients, JSON mode through a real llamad and llama-server:
LangChain's `with_structured_output(method="json_mode")` over OpenAI and Ollama, and
LiteLLM's `ollama/` provider with `response_format` json_object. Each relies on the
server enforcing a JSON object; the tiny model finishes one for some seeds only, so each
tries seed after seed until one finishes, and an answer cut short must still be JSON."""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
from client_helpers import AUTH, KEY, client_gateway, finished_json

pytestmark = pytest.mark.timeout(180)

HI = "hi"


def parsed_or_cut(parse: Callable[[int], Any]) -> Callable[[int], tuple[str, bool]]:
    """LangChain's JSON-mode call as `finished_json` reads it: (text, finished)."""
    from langchain_core.exceptions import OutputParserException

    def answer(seed: int) -> tuple[str, bool]:
        try:
            return json.dumps(parse(seed)), True
        except OutputParserException as exc:  # cut by the token limit
            return str(exc.llm_output or ""), False
        except openai.LengthFinishReasonError:  # the same, said by openai's parser
            return "", False

    return answer


def test_langchain_json_mode_over_openai_and_ollama(tiny_model: Path, tmp_path: Path) -> None:
    from langchain_ollama import ChatOllama
    from langchain_openai import ChatOpenAI

    # One pool for every model object made below, closed with the test.
    pool = httpx.HTTPTransport()
    with client_gateway(tiny_model, tmp_path) as gw, pool:

        def openai_json(seed: int) -> Any:
            chat = ChatOpenAI(
                model="gpt-4o-mini",
                base_url=f"{gw.base}/v1",
                api_key=KEY,  # type: ignore[arg-type]
                max_tokens=200,  # type: ignore[call-arg]
                seed=seed,
                max_retries=0,
                http_client=httpx.Client(transport=pool),
            )
            return chat.with_structured_output(method="json_mode").invoke(HI)

        def ollama_json(seed: int) -> Any:
            chat = ChatOllama(
                model="tiny",
                base_url=gw.base,
                client_kwargs={"headers": AUTH},
                sync_client_kwargs={"transport": pool},
                num_predict=200,
                seed=seed,
            )
            # No schema: plain JSON mode (`format: "json"`).
            return chat.with_structured_output(None, method="json_mode").invoke(HI)

        assert isinstance(finished_json(parsed_or_cut(openai_json)), dict)
        assert isinstance(finished_json(parsed_or_cut(ollama_json)), dict)


def test_litellm_ollama_provider_json_mode(
    tiny_model: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The model price list from the package, not the network.
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    import litellm
    from litellm.llms.custom_httpx.http_handler import HTTPHandler

    # LiteLLM keeps its connections for the process: these are closed with the test.
    client, shows = HTTPHandler(), HTTPHandler()
    monkeypatch.setattr(litellm, "module_level_client", shows)
    with client_gateway(tiny_model, tmp_path) as gw, closing(client), closing(shows):
        # LiteLLM asks /api/show of OLLAMA_API_BASE (else localhost:11434), not api_base.
        monkeypatch.setenv("OLLAMA_API_BASE", gw.base)
        monkeypatch.setenv("OLLAMA_API_KEY", KEY)

        def answer(seed: int) -> tuple[str, bool]:
            reply: Any = litellm.completion(
                model="ollama/tiny",
                api_base=gw.base,
                api_key=KEY,
                messages=[{"role": "user", "content": HI}],
                response_format={"type": "json_object"},
                max_tokens=200,
                seed=seed,
                client=client,
            )
            # LiteLLM says "stop" even when num_predict cut the answer: whether it parses
            # tells which it was.
            text = reply.choices[0].message.content or ""
            try:
                json.loads(text)
            except ValueError:
                return text, False
            return text, True

        assert isinstance(finished_json(answer), dict)
