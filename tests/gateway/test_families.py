"""Each API family's error shape, for refusals the gateway writes and upstream errors."""

from __future__ import annotations

import json

import pytest

from llamad.gateway.contract.families import gateway_shape
from llamad.gateway.relay.upstream_errors import refit

OPENAI_500 = json.dumps(
    {"error": {"code": 500, "message": "image input is not supported", "type": "server_error"}}
).encode()


@pytest.mark.parametrize(
    ("path", "shape"),
    [
        ("/v1/chat/completions", {"error": {"message": "m", "type": "invalid_request_error",
                                            "param": None, "code": "c"}}),
        ("/api/chat", {"error": "m"}),
        ("/", {"error": "m"}),
        ("/v1/messages/count_tokens", {"type": "error",
                                       "error": {"type": "not_found_error", "message": "m"}}),
    ],
)  # fmt: skip
def test_the_shape_follows_the_path(path: str, shape: dict[str, object]) -> None:
    assert json.loads(gateway_shape(path, 404, "c", "m")) == shape


def test_a_client_mistake_is_a_400_in_every_family() -> None:
    status, body = refit("/v1/chat/completions", 500, OPENAI_500)
    assert status == 400
    assert json.loads(body)["error"]["type"] == "invalid_request_error"
    status, body = refit("/v1/messages", 500, OPENAI_500)
    assert status == 400
    assert json.loads(body)["error"]["type"] == "invalid_request_error"


@pytest.mark.parametrize(
    "message",
    [
        "Failed to parse messages: [json.exception.type_error.302] type must be string",
        "Failed to parse tools: Missing tool type: 5; tools = [5]",
    ],
)
def test_a_wrong_typed_field_is_the_clients_mistake(message: str) -> None:
    """llama-server's 500 for a message field or tool of the wrong type (as it words
    it) is a 400: the OpenAI SDK would send it twice more."""
    raw = json.dumps({"error": {"code": 500, "message": message, "type": "server_error"}})
    status, body = refit("/v1/chat/completions", 500, raw.encode())
    assert status == 400
    assert json.loads(body)["error"]["message"] == message


def test_an_honest_openai_error_passes_as_it_came() -> None:
    raw = b'{"error":{"code":400,"message":"too long","type":"exceed_context_size_error"}}'
    assert refit("/v1/completions", 400, raw) == (400, raw)
    _, body = refit("/v1/messages", 400, raw)
    assert json.loads(body) == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "too long"},
    }
