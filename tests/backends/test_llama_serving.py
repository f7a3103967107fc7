"""What a llama-server instance serves, read from its settings."""

from __future__ import annotations

import pytest

from llamad.backends.llama_serving import llama_serving


def test_answers_name_the_first_alias_else_the_model_file() -> None:
    assert llama_serving({"LLAMA_ARG_ALIAS": "tiny,other"}).answer_name == "tiny"
    assert llama_serving({"LLAMA_ARG_MODEL": "/m/x.gguf"}).answer_name == "/m/x.gguf"


@pytest.mark.parametrize(
    ("settings", "per_request"),
    [
        ({}, None),  # the trained context
        ({"LLAMA_ARG_CTX_SIZE": "2048"}, 2048),  # slots left to llama-server: one cache
        ({"LLAMA_ARG_CTX_SIZE": "2048", "LLAMA_ARG_N_PARALLEL": "2"}, 1024),
        ({"LLAMA_ARG_CTX_SIZE": "2048", "LLAMA_ARG_N_PARALLEL": "-1"}, 2048),
        (
            {
                "LLAMA_ARG_CTX_SIZE": "2048",
                "LLAMA_ARG_N_PARALLEL": "4",
                "LLAMA_ARG_KV_UNIFIED": "1",
            },
            2048,
        ),
    ],
)
def test_context_per_request(settings: dict[str, str], per_request: int | None) -> None:
    assert llama_serving(settings).ctx_per_request == per_request


def test_embeddings_vision_and_template() -> None:
    assert llama_serving({"LLAMA_ARG_EMBEDDINGS": "true"}).embeddings
    assert llama_serving({"LLAMA_ARG_POOLING": "mean"}).embeddings
    assert not llama_serving({"LLAMA_ARG_POOLING": "none"}).embeddings
    assert not llama_serving({"LLAMA_ARG_EMBEDDINGS": "yes"}).embeddings  # not llama's "true"
    assert llama_serving({"LLAMA_ARG_MMPROJ": "/m/p.gguf"}).vision
    assert not llama_serving({"LLAMA_ARG_MMPROJ_AUTO": "1"}).vision
    file = llama_serving({"LLAMA_ARG_CHAT_TEMPLATE_FILE": "/t.jinja"}).template_file
    assert str(file) == "/t.jinja"
