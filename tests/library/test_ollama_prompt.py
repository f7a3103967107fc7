"""An Ollama model's template, system prompt and stop words, taken as Ollama takes them,
through a daemon running the real llama-server: a chatml Ollama template renders a GGUF
without one as chatml, the system layer reaches the prompt, the params' stop cuts the
answer, a client's own system and stop win, and a template of no known family is listed
with the reason while the model still answers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import Llamad
from library_helpers import cut_at, library_daemon, ollama_store, post_json

from llamad.daemon.tinymodel import write_tiny_model
from llamad.library.ollama_template import JINJA

pytestmark = pytest.mark.timeout(120)

SYSTEM = "You are terse."
STOPS = ["e", "a", "o", "t"]
CHATML = (
    "{{- if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}"
    "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
    "<|im_start|>assistant\n"
)
ALPACA = (
    "{{ if .System }}{{ .System }}\n\n{{ end }}### Instruction:\n{{ .Prompt }}\n\n### Response:\n"
)
LLAMA3 = (
    "{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>"
    "{{ end }}<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>"
)
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
def served(tmp_path: Path, tiny_model: Path) -> Iterator[tuple[Llamad, str]]:
    bare = write_tiny_model(tmp_path / "bare.gguf", chat_template=None)
    store = tmp_path / "ollama"
    params = {"stop": STOPS, "temperature": 0, "seed": 1}
    ollama_store(store, "chat", "1b", bare, params=params, template=CHATML, system=SYSTEM)
    ollama_store(store, "odd", "1b", tiny_model, template=ALPACA)
    ollama_store(store, "l3", "1b", tiny_model, template=LLAMA3)  # over the GGUF's ChatML
    library = f'[library]\ndirs = ["{store}"]\n[library.defaults]\nctx_size = 256\n'
    with library_daemon(library) as (ld, base):
        yield ld, base


def _rendered(base: str, messages: list[dict[str, str]], model: str = "chat:1b") -> str:
    doc = post_json(base, f"/upstream/{model}/apply-template", {"messages": messages})
    return str(doc["prompt"])


def test_chatml_template_and_system_reach_the_prompt(served: tuple[Llamad, str]) -> None:
    daemon = served[1]
    props = httpx.get(f"{daemon}/upstream/chat:1b/props", timeout=60).json()
    # Ours, not llama-server's own ChatML for a GGUF without a template.
    assert props["chat_template"] == JINJA["chatml"]
    assert _rendered(daemon, HI) == (
        f"<|im_start|>system\n{SYSTEM}<|im_end|>\n"
        "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    )
    mine = [{"role": "system", "content": "Mine."}, *HI]
    assert _rendered(daemon, mine).startswith("<|im_start|>system\nMine.<|im_end|>\n")
    assert SYSTEM not in _rendered(daemon, mine)
    # Another family's Ollama template wins over the GGUF's own ChatML, as with Ollama.
    assert _rendered(daemon, HI, "l3:1b") == (
        "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )


MINE = [{"role": "system", "content": "X"}, *HI]
# Route, a request without a system prompt, what makes it the client's own "X", and where
# the answer counts the prompt's tokens.
ROUTES: list[tuple[str, dict[str, Any], dict[str, Any], str]] = [
    ("/v1/chat/completions", {"messages": HI, "max_tokens": 1}, {"messages": MINE}, "usage"),
    ("/v1/responses", {"input": "hi", "max_output_tokens": 1}, {"instructions": "X"}, "usage"),
    ("/v1/messages", {"messages": HI, "max_tokens": 1}, {"system": "X"}, "usage"),
    ("/api/chat", {"messages": HI, "options": {"num_predict": 1}}, {"messages": MINE}, "ollama"),
    ("/api/generate", {"prompt": "hi", "options": {"num_predict": 1}}, {"system": "X"}, "ollama"),
]


def test_system_counts_in_a_real_chat_unless_the_client_sends_its_own(
    served: tuple[Llamad, str],
) -> None:
    daemon = served[1]

    # The tiny model's vocabulary is bytes: one prompt token per character.
    def tokens(path: str, body: dict[str, Any], counted: str) -> int:
        doc = post_json(daemon, path, {"model": "chat:1b", "stream": False, **body})
        if counted == "ollama":
            return int(doc["prompt_eval_count"])
        usage = doc["usage"]
        # Anthropic's usage counts the cached part of the prompt apart.
        whole = usage.get("prompt_tokens", usage.get("input_tokens", 0))
        return int(whole) + int(usage.get("cache_read_input_tokens", 0))

    extra = len(SYSTEM) - len("X")
    for path, body, own, counted in ROUTES:
        got = tokens(path, body, counted) - tokens(path, {**body, **own}, counted)
        assert got == extra, path


def test_params_stop_cuts_the_answer_unless_the_client_sets_its_own(
    served: tuple[Llamad, str],
) -> None:
    daemon = served[1]
    body: dict[str, Any] = {"model": "chat:1b", "messages": HI, "max_tokens": 24}
    full = post_json(daemon, "/v1/chat/completions", {**body, "stop": []})
    whole = full["choices"][0]["message"]["content"]
    assert 0 < len(cut_at(whole, STOPS)) < len(whole), f"{whole!r}: pick other stop words"
    cut = post_json(daemon, "/v1/chat/completions", body)
    assert cut["choices"][0]["message"]["content"] == cut_at(whole, STOPS)
    assert cut["choices"][0]["finish_reason"] == "stop"
    ollama: dict[str, Any] = {"model": "chat:1b", "messages": HI, "stream": False}
    own = post_json(daemon, "/api/chat", {**ollama, "options": {"num_predict": 24, "stop": []}})
    assert own["message"]["content"] == whole
    cut_ollama = post_json(daemon, "/api/chat", {**ollama, "options": {"num_predict": 24}})
    assert cut_ollama["message"]["content"] == cut_at(whole, STOPS)


def test_show_gives_the_store_template_system_and_stop(served: tuple[Llamad, str]) -> None:
    daemon = served[1]
    doc = post_json(daemon, "/api/show", {"model": "chat:1b"})
    assert doc["template"].endswith(CHATML)  # after llamad's fill-in-the-middle line
    assert doc["system"] == SYSTEM
    assert all(f'stop "{s}"' in doc["parameters"] for s in STOPS)


def test_an_unrecognised_template_keeps_the_gguf_one_and_answers(
    served: tuple[Llamad, str],
) -> None:
    ld, daemon = served
    assert ld.events("library.found", model="odd:1b")[0]["note"].startswith("Ollama template")
    listing = ld.ctl("models").stdout
    assert "odd:1b: Ollama template not recognised ('{{ if .System }}" in listing
    assert "chat:1b:" not in listing  # translated: nothing to say
    doc = post_json(daemon, "/api/show", {"model": "odd:1b"})
    assert doc["template"].endswith(ALPACA)  # what the store holds, as Ollama shows it
    assert "system" not in doc  # none in its store: left out, as Ollama leaves it out
    reply = post_json(
        daemon, "/v1/chat/completions", {"model": "odd:1b", "messages": HI, "max_tokens": 2}
    )
    assert reply["choices"][0]["message"]["role"] == "assistant"
    rendered = post_json(daemon, "/upstream/odd:1b/apply-template", {"messages": HI})["prompt"]
    assert rendered.startswith("<|im_start|>user\nhi")  # the GGUF's own ChatML
