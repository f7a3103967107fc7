"""gateway.prompt_defaults: a model's system prompt and stop words go into the requests
that lack their own, on each route in its own field (a table; no server)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from llamad.backends.prompt import PromptDefaults
from llamad.gateway.relay.prompt_defaults import apply, with_defaults

pytestmark = pytest.mark.timeout(10)

BOTH = PromptDefaults(system="Be terse.", stop=("###",))
SYS = {"role": "system", "content": "Be terse."}
HI = {"role": "user", "content": "hi"}
MINE = {"role": "system", "content": "Mine."}


@pytest.mark.parametrize(
    ("path", "doc", "expected"),
    [
        ("/v1/chat/completions", {"messages": [HI]}, {"messages": [SYS, HI], "stop": ["###"]}),
        ("/chat/completions", {"messages": [HI]}, {"messages": [SYS, HI], "stop": ["###"]}),
        # The client's own system (or developer) message and stop win.
        ("/v1/chat/completions", {"messages": [MINE, HI], "stop": []}, None),
        (
            "/v1/chat/completions",
            {"messages": [{"role": "developer", "content": "d"}, HI]},
            {"messages": [{"role": "developer", "content": "d"}, HI], "stop": ["###"]},
        ),
        ("/apply-template", {"messages": [HI]}, {"messages": [SYS, HI]}),  # no sampling
        # A prompt the client rendered itself gets stop words, no system prompt.
        ("/completion", {"prompt": "hi"}, {"prompt": "hi", "stop": ["###"]}),
        ("/v1/completions", {"prompt": "hi"}, {"prompt": "hi", "stop": ["###"]}),
        ("/infill", {"input_prefix": "a"}, {"input_prefix": "a", "stop": ["###"]}),
        # Anthropic's fields.
        (
            "/v1/messages",
            {"messages": [HI]},
            {"messages": [HI], "system": "Be terse.", "stop_sequences": ["###"]},
        ),
        ("/v1/messages", {"messages": [HI], "system": "x", "stop_sequences": ["y"]}, None),
        # OpenAI's Responses: `instructions`, unless it has them or a system item.
        ("/v1/responses", {"input": "hi"}, {"input": "hi", "instructions": "Be terse."}),
        ("/v1/responses", {"input": "hi", "instructions": "x"}, None),
        ("/v1/responses", {"input": [MINE, HI]}, None),
        # Routes that take neither.
        ("/v1/embeddings", {"input": "hi"}, None),
        ("/tokenize", {"content": "hi"}, None),
    ],
)
def test_defaults_fill_what_the_request_lacks(
    path: str, doc: dict[str, Any], expected: dict[str, Any] | None
) -> None:
    before = json.loads(json.dumps(doc))
    changed = apply(BOTH, path, doc)
    assert changed is (expected is not None)
    assert doc == (expected if expected is not None else before)


def test_only_a_changed_body_is_written_again() -> None:
    body = b'{"messages": [{"role": "system", "content": "s"}], "stop": null}'
    stop_only = PromptDefaults(stop=("###",))
    assert json.loads(with_defaults(stop_only, "/v1/chat/completions", body))["stop"] == ["###"]
    assert with_defaults(stop_only, "/v1/embeddings", body) is body
    assert with_defaults(stop_only, "/completion", b"not json") == b"not json"
    assert with_defaults(stop_only, "/completion", b"[1]") == b"[1]"
