"""Each chat family's Jinja, as llamad gives it to llama-server for an Ollama template,
rendered by the real binary's `/apply-template` (a system prompt, a turn each and a
question; and without the system prompt), checked against a reference: the same
binary's own built-in renderer for the family (llama.cpp's C++ one, `--no-jinja`), or
where it has none that Ollama agrees with, Ollama's rendering from its template tests."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
from helpers import free_port, wait_for

from llamad.backends.builtin_template import template_file
from llamad.daemon.tinymodel import write_tiny_model
from llamad.library.ollama_template import JINJA

pytestmark = pytest.mark.timeout(60)

SYSTEM = {"role": "system", "content": "You are a helpful assistant."}
TURNS = [
    {"role": "user", "content": "Hello, how are you?"},
    {"role": "assistant", "content": "I'm doing great. How can I help you today?"},
    {"role": "user", "content": "I'd like to show off how chat templating works!"},
]
U1, A1, U2 = (m["content"] for m in TURNS)

# Family -> llama.cpp's built-in template of that format, or the expected renderings
# (with the system prompt, without it).
REFERENCES: dict[str, str | tuple[str, str]] = {
    "chatml": "chatml",
    "llama3": "llama3",
    "gemma": "gemma",  # also Ollama's gemma3: the system prompt opens the first user turn
    "command-r": "command-r",
    "granite": "granite",  # Granite 3's roles, as Ollama's granite3 models ship them
    "phi3": "phi3",
    "mistral": "mistral-v3",  # also Ollama's mistral-instruct testdata
    # Ollama's template testdata; llama.cpp's "zephyr" is StableLM's (<|endoftext|>).
    "zephyr": (
        f"<|system|>\n{SYSTEM['content']}</s>\n<|user|>\n{U1}</s>\n<|assistant|>\n{A1}</s>\n"
        f"<|user|>\n{U2}</s>\n<|assistant|>\n",
        f"<|user|>\n{U1}</s>\n<|assistant|>\n{A1}</s>\n<|user|>\n{U2}</s>\n<|assistant|>\n",
    ),
    # llama.cpp's "llama2-sys-bos" with the space after [/INST] that Meta's and Ollama's
    # write (Ollama's also repeats an empty <<SYS>><</SYS>> in later turns).
    "llama2": (
        f"[INST] <<SYS>>\n{SYSTEM['content']}\n<</SYS>>\n\n{U1} [/INST] {A1}</s><s>[INST] {U2} "
        "[/INST]",
        f"[INST] {U1} [/INST] {A1}</s><s>[INST] {U2} [/INST]",
    ),
}


@pytest.fixture(scope="module")
def bare_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny GGUF with no template of its own: only the one given is in play."""
    return write_tiny_model(tmp_path_factory.mktemp("bare") / "bare.gguf", chat_template=None)


@contextmanager
def _server(llama_server: Path, model: Path, args: list[str], log: Path) -> Iterator[str]:
    """A real llama-server with `args`, ready; yields its URL and stops it after."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_")}
    argv = [str(llama_server), "-m", str(model), "--port", str(port), "-c", "256", "-np", "1"]
    with log.open("wb") as out:
        proc = subprocess.Popen([*argv, *args], env=env, stdout=out, stderr=out)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _ready(url, proc), 15, f"llama-server {args}")
        yield url
    finally:
        proc.kill()  # only its renderings matter: no clean shutdown to wait for
        proc.wait(10)


def _ready(url: str, proc: subprocess.Popen[bytes]) -> bool:
    assert proc.poll() is None, "llama-server exited: see its log"
    try:
        return httpx.get(f"{url}/health", timeout=2).status_code == 200
    except httpx.TransportError:  # not listening yet
        return False


def _renderings(url: str) -> tuple[str, str]:
    def one(messages: list[dict[str, Any]]) -> str:
        reply = httpx.post(f"{url}/apply-template", json={"messages": messages}, timeout=10)
        assert reply.status_code == 200, reply.text
        return str(reply.json()["prompt"])

    return one([SYSTEM, *TURNS]), one(TURNS)


def test_every_family_has_a_reference() -> None:
    assert set(REFERENCES) == set(JINJA)


@pytest.mark.parametrize("family", sorted(REFERENCES))
def test_a_family_renders_as_its_reference_through_the_real_binary(
    family: str, llama_server: Path, bare_model: Path, tmp_path: Path
) -> None:
    template = tmp_path / f"{family}.jinja"
    template.write_text(JINJA[family])
    args = ["--chat-template-file", str(template)]
    with _server(llama_server, bare_model, args, tmp_path / "ours.log") as url:
        ours = _renderings(url)
    reference = REFERENCES[family]
    if isinstance(reference, str):
        builtin = ["--no-jinja", "--chat-template", reference]
        with _server(llama_server, bare_model, builtin, tmp_path / "builtin.log") as url:
            reference = _renderings(url)
    assert ours == reference


@pytest.mark.parametrize(
    ("family", "reference"),
    [("llama3", "llama3"), ("mistral", "mistral-v3"), ("chatml", "chatml"), ("phi3", "phi3")],
)
def test_a_shipped_built_in_renders_as_llama_cpps_own(
    family: str, reference: str, llama_server: Path, bare_model: Path, tmp_path: Path
) -> None:
    """The templates a GGUF without one gets (builtin_template.py), against the same."""
    args = ["--chat-template-file", str(template_file(family))]
    with _server(llama_server, bare_model, args, tmp_path / "ours.log") as url:
        ours = _renderings(url)
    builtin = ["--no-jinja", "--chat-template", reference]
    with _server(llama_server, bare_model, builtin, tmp_path / "builtin.log") as url:
        assert ours == _renderings(url)
