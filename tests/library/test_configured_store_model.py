"""A configured instance naming an Ollama store model, through a daemon and the real
llama-server: the store's template family renders its prompt (over the GGUF's own), the
store's system prompt reaches it and its stop words cut; a table's own template, system
and stop win; and a reload that changes only `system` or `stop` keeps the same process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import Llamad, free_port, wait_for
from library_helpers import cut_at, library_daemon, ollama_store, post_json

pytestmark = pytest.mark.timeout(120)

SYSTEM = "You are terse."
STOPS = ["e", "a", "o", "t", "5", "j"]
LLAMA3 = (
    "{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>"
    "{{ end }}<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>"
)
OWN = "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}[assistant] "
HI = [{"role": "user", "content": "hi"}]


def _instances(store: Path) -> str:
    return (
        f'[library]\ndirs = ["{store}"]\n'
        f'[instances.mine]\nmodel = "chat:1b"\nport = {free_port()}\nctx_size = 256\n'
        f'[instances.own]\nmodel = "other:1b"\nport = {free_port()}\nctx_size = 256\n'
        f'chat_template = "{OWN.replace(chr(10), chr(92) + "n")}"\nsystem = ""\n'
    )


@pytest.fixture
def served(tmp_path: Path, tiny_model: Path) -> Iterator[tuple[Llamad, str]]:
    store = tmp_path / "ollama"
    params = {"stop": STOPS}
    for name in ("chat", "other"):  # Llama 3 over the GGUF's own ChatML
        ollama_store(store, name, "1b", tiny_model, params=params, template=LLAMA3, system=SYSTEM)
    with library_daemon(_instances(store)) as (ld, base):
        yield ld, base


def _rendered(base: str, model: str) -> str:
    return str(post_json(base, f"/upstream/{model}/apply-template", {"messages": HI})["prompt"])


def _answer(base: str, **extra: Any) -> str:
    body = {"model": "mine", "messages": HI, "max_tokens": 24, "temperature": 0, "seed": 1}
    doc = post_json(base, "/v1/chat/completions", {**body, **extra})
    return str(doc["choices"][0]["message"]["content"])


def test_the_store_template_system_and_stop_reach_a_configured_instance(
    served: tuple[Llamad, str],
) -> None:
    ld, base = served
    assert _rendered(base, "mine") == (
        f"<|start_header_id|>system<|end_header_id|>\n\n{SYSTEM}<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\n"
    )
    whole = _answer(base, stop=[])
    assert 0 < len(cut_at(whole, STOPS)) < len(whole), f"{whole!r}: pick other stop words"
    assert _answer(base) == cut_at(whole, STOPS)
    show = post_json(base, "/api/show", {"model": "chat:1b"})  # its store name is an alias
    assert show["template"].endswith(LLAMA3)
    assert show["system"] == SYSTEM
    # The table's own template and its empty system win over the store's.
    assert _rendered(base, "own") == "[user] hi\n[assistant] "
    own = post_json(base, "/api/show", {"model": "own"})
    assert own["template"].endswith(OWN)
    assert "system" not in own
    assert ld.instance("mine")["state"] == "running"


def test_a_reload_changing_only_system_and_stop_keeps_the_process(
    served: tuple[Llamad, str],
) -> None:
    ld, base = served
    whole = _answer(base, stop=[])
    assert _answer(base) == cut_at(whole, STOPS)
    pid = ld.instance("mine")["pid"]
    mine = 'model = "chat:1b"\n'
    edited = ld.config.read_text().replace(mine, mine + 'system = "Be brief."\nstop = []\n')
    ld.config.write_text(edited)
    report = ld.wait_event("config.reloaded", timeout=30)[0]
    assert "mine" in report["unchanged"]
    wait_for(lambda: "Be brief." in _rendered(base, "mine"), 15, "the new system prompt")
    assert SYSTEM not in _rendered(base, "mine")
    after = _answer(base, stop=[])
    assert cut_at(after, STOPS) != after, f"{after!r}: pick other stop words"
    assert _answer(base) == after  # the store's stop words no longer cut it
    assert ld.instance("mine")["pid"] == pid
    assert not ld.events("instance.state_changed", instance="mine", to="stopping")
