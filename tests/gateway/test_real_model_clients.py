"""The real small model through the gateway with no template configured: llamad gives it
Gemma's, so it answers sensibly, and clients that force a tool call get one whose
arguments parse (docs/clients.md names these tests)."""

from __future__ import annotations

import asyncio
import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import anthropic
import openai
import pytest
from gateway_helpers import Gw, gateway
from pydantic import BaseModel
from pydantic_ai import Agent
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

pytestmark = pytest.mark.timeout(420)

# No template: the GGUF carries none, and llamad picks Gemma's.
GEMMA = {"ctx_size": 2048, "n_parallel": 1, "threads": 2}
QUESTION = [{"role": "user", "content": "What is the capital of France?"}]
CITY = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
TOOL = {"type": "function", "function": {"name": "record_city", "parameters": CITY}}
INSTRUCTOR = Path(__file__).resolve().parents[2] / ".venv-instructor" / "bin" / "python"


class City(BaseModel):
    """A city."""

    city: str


@pytest.fixture
def gw(real_model: Path) -> Iterator[Gw]:
    with gateway(real_model, {"gemma": GEMMA}) as running:
        yield running


@pytest.fixture
def oai(gw: Gw) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=f"{gw.base}/v1", api_key="none", max_retries=0, timeout=120) as c:
        yield c


def test_the_model_answers_with_no_template_configured(gw: Gw, oai: openai.OpenAI) -> None:
    """Status says which template runs; at temperature 0 the model knows Paris."""
    assert gw.ld.instance("gemma")["chat_template"] == "built-in gemma (the model carries none)"
    reply = oai.chat.completions.create(
        model="gemma",
        messages=QUESTION,
        max_tokens=12,
        temperature=0,  # type: ignore[arg-type]
    )
    assert "Paris" in (reply.choices[0].message.content or "")


def _city(arguments: str | dict[str, object]) -> City:
    return City.model_validate(json.loads(arguments) if isinstance(arguments, str) else arguments)


def test_forced_tool_calls_from_the_real_model(gw: Gw, oai: openai.OpenAI) -> None:
    """openai (whole, streamed), anthropic and pydantic-ai's default tool output get a
    call whose arguments parse against the tool's schema."""
    named = {"type": "function", "function": {"name": "record_city"}}
    reply = oai.chat.completions.create(
        model="gemma", messages=QUESTION, max_tokens=48, temperature=0,  # type: ignore[arg-type]
        tools=[TOOL], tool_choice=named,  # type: ignore[list-item, arg-type]
    )  # fmt: skip
    call = (reply.choices[0].message.tool_calls or [])[0]
    assert reply.choices[0].finish_reason == "tool_calls"
    assert _city(call.function.arguments)  # type: ignore[union-attr]
    chunks = list(
        oai.chat.completions.create(
            model="gemma", messages=QUESTION, max_tokens=48, temperature=0, stream=True,  # type: ignore[arg-type]
            tools=[TOOL], tool_choice="required",  # type: ignore[list-item]
        )
    )  # fmt: skip
    pieces = [t for ch in chunks for c in ch.choices for t in c.delta.tool_calls or []]
    assert _city("".join(p.function.arguments or "" for p in pieces))  # type: ignore[union-attr]
    with anthropic.Anthropic(base_url=gw.base, api_key="none", max_retries=0, timeout=120) as a:
        message = a.messages.create(
            model="gemma", max_tokens=48, messages=QUESTION,  # type: ignore[arg-type]
            tools=[{"name": "record_city", "input_schema": CITY}],  # type: ignore[list-item]
            tool_choice={"type": "tool", "name": "record_city"},
        )  # fmt: skip
    assert message.stop_reason == "tool_use"
    assert _city(message.content[0].input)  # type: ignore[union-attr]
    assert isinstance(asyncio.run(_pydantic_ai(gw)), City)


async def _pydantic_ai(gw: Gw) -> City:
    """pydantic-ai's default tool output: a forced call of its `final_result` tool."""
    async with openai.AsyncOpenAI(base_url=f"{gw.base}/v1", api_key="x", max_retries=0) as c:
        model = OpenAIChatModel("gemma", provider=OpenAIProvider(openai_client=c))
        agent = Agent(model, output_type=City)
        settings = {"max_tokens": 48, "temperature": 0.0}
        run = await agent.run(QUESTION[0]["content"], model_settings=settings)  # type: ignore[arg-type]
        return run.output


def test_instructor_tools_mode(gw: Gw) -> None:
    """instructor's TOOLS mode, whole and streamed (create_partial), gets its model. It runs
    in .venv-instructor (built by `make test`): it pins jiter and rich below the versions
    the test environment's openai needs."""
    if not (INSTRUCTOR.parent.parent / ".installed").exists():
        pytest.skip("no .venv-instructor: `make test` builds it (pyproject's instructor group)")
    script = Path(__file__).with_name("instructor_row.py")
    done = subprocess.run(
        [INSTRUCTOR, script, f"{gw.base}/v1", "gemma"],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    answers = json.loads(done.stdout.splitlines()[-1])
    assert _city(answers["whole"])
    assert _city(answers["streamed"])
