"""A `llama` GGUF without a chat template gets the built-in one its vocabulary's
special tokens mark (Llama 3's header tokens, Mistral's [INST]); status names it, and
the real llama-server runs it."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from helpers import Llamad, free_port, write_config

from llamad.backends.builtin_template import Choice, choose, template_file, vocab_family
from llamad.daemon.tinymodel import write_tiny_model

pytestmark = pytest.mark.timeout(60)

LLAMA3 = ("<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>")
MISTRAL = ("[INST]", "[/INST]", "[TOOL_CALLS]")
NONE_LINE = "none: the model carries no chat template (llama); ChatML is used"


@pytest.mark.parametrize(
    ("tokens", "family"),
    [
        (LLAMA3, "llama3"),
        (MISTRAL, "mistral"),
        ((), None),  # Llama 2, Mistral before v0.3: [INST] is plain text
        (("<|start_header_id|>",), None),  # half of Llama 3's markers
        (("[INST]", "<|start_header_id|>"), None),  # not Mistral's vocabulary
        ((*LLAMA3, "[INST]"), "llama3"),
        (("<|im_start|>", "<|im_end|>"), None),  # ChatML goes by architecture, not here
    ],
)
def test_the_vocabulary_marks_the_family(tokens: tuple[str, ...], family: str | None) -> None:
    assert vocab_family(frozenset(tokens)) == family


@pytest.mark.parametrize(
    ("tokens", "family"), [(LLAMA3, "llama3"), (MISTRAL, "mistral"), ((), None)]
)
def test_a_llama_gguf_without_a_template_gets_its_vocabularys(
    tokens: tuple[str, ...], family: str | None, tmp_path: Path
) -> None:
    model = write_tiny_model(tmp_path / "m.gguf", chat_template=None, special_tokens=tokens)
    if family is None:
        assert choose(model) == Choice(None, NONE_LINE)
    else:
        line = f"built-in {family} (the model carries none)"
        assert choose(model) == Choice(template_file(family), line)
    # A template of its own wins, whatever the vocabulary.
    own = write_tiny_model(tmp_path / "own.gguf", special_tokens=tokens)
    assert choose(own) is None


def test_a_vocabulary_cut_short_is_no_traceback(tmp_path: Path) -> None:
    model = write_tiny_model(tmp_path / "m.gguf", chat_template=None, special_tokens=LLAMA3)
    data = model.read_bytes()
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(data[: data.index(b"<|eot_id|>")])
    assert choose(cut) is None  # not a readable GGUF: llama-server says why


def test_status_names_the_built_in_llama3_template_and_the_server_answers(
    tmp_path: Path,
) -> None:
    model = write_tiny_model(tmp_path / "l3.gguf", chat_template=None, special_tokens=LLAMA3)
    port = free_port()
    instances = {"l3": {"model": model, "port": port, "ctx_size": 512}}
    cfg = write_config(tmp_path / "llamad.toml", instances, {"state_dir": str(tmp_path / "state")})
    with Llamad(cfg) as d:
        d.wait_running("l3", 30)
        assert d.instance("l3")["chat_template"] == "built-in llama3 (the model carries none)"
        body = {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 4}
        reply = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=30)
        assert reply.status_code == 200, reply.text
        assert reply.json()["choices"][0]["message"]["role"] == "assistant"


def test_a_rewritten_model_is_searched_again(tmp_path: Path) -> None:
    """The vocabulary's answer is kept per file as it is: a model rewritten in place with
    another vocabulary gets its own family, not the old file's."""
    path = tmp_path / "m.gguf"
    write_tiny_model(path, chat_template=None, special_tokens=LLAMA3)
    assert choose(path) == Choice(
        template_file("llama3"), "built-in llama3 (the model carries none)"
    )
    write_tiny_model(path, chat_template=None, special_tokens=MISTRAL)
    assert choose(path) == Choice(
        template_file("mistral"), "built-in mistral (the model carries none)"
    )
