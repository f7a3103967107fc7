"""A configured instance naming an Ollama library model gets its store's template, system
prompt and stop words, unless its table sets its own (any spelling of a template, an
empty `system` or `stop` to opt out); `system` and `stop` never change the launch."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import free_port
from library_helpers import ollama_store

from llamad.backends.prompt import PromptDefaults
from llamad.config.load import ConfigError, load
from llamad.library.ollama_template import JINJA

pytestmark = pytest.mark.timeout(60)

LLAMA3 = (
    "{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>"
    "{{ end }}<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>"
)
STORE = PromptDefaults(system="Be kind.", stop=("x", "y"), template=LLAMA3)


def _load(tmp_path: Path, tiny_model: Path, table: str) -> tuple[dict[str, str], object]:
    store = tmp_path / "ollama"
    params = {"stop": ["x", "y"]}
    ollama_store(store, "chat", "1b", tiny_model, params=params, template=LLAMA3, system="Be kind.")
    path = tmp_path / "llamad.toml"
    path.write_text(
        f'[gateway]\nlisten = "127.0.0.1:{free_port()}"\n[library]\ndirs = ["{store}"]\n'
        f'[instances.mine]\nmodel = "chat:1b"\nport = {free_port()}\n{table}'
    )
    spec = load(path).instances["mine"]
    return dict(spec.settings), spec.prompt


def test_a_linked_instance_gets_the_store_template_system_and_stop(
    tmp_path: Path, tiny_model: Path
) -> None:
    env, prompt = _load(tmp_path, tiny_model, "")
    # Llama 3 over the GGUF's own ChatML: the family's Jinja, as the library's model gets.
    assert env["LLAMA_ARG_CHAT_TEMPLATE"] == JINJA["llama3"]
    assert prompt == STORE


@pytest.mark.parametrize(
    "table",
    [
        'chat_template = "chatml"\n',
        'LLAMA_ARG_CHAT_TEMPLATE_FILE = "/t.jinja"\n',
        'LLAMA_ARG_CHAT_TEMPLATE = "chatml"\n',
        'args = ["--chat-template-file=/t.jinja"]\n',
    ],
)
def test_its_own_template_wins_and_show_stops_naming_the_store_one(
    tmp_path: Path, tiny_model: Path, table: str
) -> None:
    env, prompt = _load(tmp_path, tiny_model, table)
    assert env.get("LLAMA_ARG_CHAT_TEMPLATE") in (None, "chatml")
    assert JINJA["llama3"] not in env.values()
    assert prompt == PromptDefaults(system="Be kind.", stop=("x", "y"))


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        ('system = "Mine."\nstop = ["z"]\n', PromptDefaults("Mine.", ("z",), LLAMA3)),
        ('system = ""\n', PromptDefaults(None, ("x", "y"), LLAMA3)),
        ("stop = []\n", PromptDefaults("Be kind.", (), LLAMA3)),
    ],
)
def test_its_own_system_and_stop_win_and_empty_opts_out(
    tmp_path: Path, tiny_model: Path, table: str, expected: PromptDefaults
) -> None:
    assert _load(tmp_path, tiny_model, table)[1] == expected


def test_any_instance_may_set_system_and_stop_without_changing_its_launch(
    tmp_path: Path, tiny_model: Path
) -> None:
    path = tmp_path / "llamad.toml"
    head = f'[instances.a]\nmodel = "{tiny_model}"\nport = {free_port()}\n'
    path.write_text(head)
    plain = load(path).instances["a"]
    assert plain.prompt is None
    path.write_text(head + 'system = "Be brief."\nstop = ["\\n\\n"]\n')
    given = load(path).instances["a"]
    assert given.prompt == PromptDefaults("Be brief.", ("\n\n",))
    assert given.launch == plain.launch  # a reload takes it with no restart


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('stop = "x"', "instances.a.stop: "),
        ('stop = [""]', "instances.a.stop.0: "),
        ("system = 3", "instances.a.system: "),
    ],
)
def test_bad_system_or_stop_is_one_line_naming_the_key(
    tmp_path: Path, tiny_model: Path, line: str, message: str
) -> None:
    path = tmp_path / "llamad.toml"
    path.write_text(f'[instances.a]\nmodel = "{tiny_model}"\nport = {free_port()}\n{line}\n')
    with pytest.raises(ConfigError) as err:
        load(path)
    assert len(err.value.lines) == 1
    assert f"{path}:4: {message}" in err.value.lines[0], err.value.lines
