"""instructor's TOOLS mode against a running gateway, whole and streamed (partial), run by
tests/gateway/test_real_model_clients.py with .venv-instructor's python: instructor pins
jiter and rich below what the test environment's openai needs.

Usage: python instructor_row.py BASE_URL MODEL; prints {"whole": ..., "streamed": ...}."""

from __future__ import annotations

import json
import sys

import instructor
import openai
from pydantic import BaseModel

QUESTION = [{"role": "user", "content": "What is the capital of France?"}]


class City(BaseModel):
    """A city."""

    city: str


def main(base: str, model: str) -> None:
    with openai.OpenAI(base_url=base, api_key="none", max_retries=0, timeout=120) as oai:
        client = instructor.from_openai(oai, mode=instructor.Mode.TOOLS)
        ask = {"model": model, "messages": QUESTION, "max_tokens": 48, "temperature": 0}
        whole = client.chat.completions.create(response_model=City, max_retries=0, **ask)
        partials = list(
            client.chat.completions.create_partial(response_model=City, max_retries=0, **ask)
        )
    print(json.dumps({"whole": whole.model_dump(), "streamed": partials[-1].model_dump()}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
