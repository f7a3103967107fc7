"""Ollama's Go templates recognised by family, and what llama-server is given for each:
the family's Jinja, the GGUF's own when it is of that family, a note when none fits."""

from __future__ import annotations

import pytest

from llamad.daemon.tinymodel import CHAT_TEMPLATE
from llamad.library.ollama_template import JINJA, family, translate

pytestmark = pytest.mark.timeout(10)

# Templates as Ollama's library ships them (shortened where the family is already clear).
QWEN = (
    "{{- if .System }}<|im_start|>system\n{{ .System }}<|im_end|>\n{{ end }}"
    "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
    "<|im_start|>assistant\n"
)
LLAMA3 = (
    "{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>"
    "{{ end }}{{ if .Prompt }}<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}"
    "<|eot_id|>{{ end }}<|start_header_id|>assistant<|end_header_id|>\n\n{{ .Response }}"
    "<|eot_id|>"
)
GEMMA = (
    "{{- range $i, $_ := .Messages }}{{- $last := eq (len (slice $.Messages $i)) 1 }}"
    '{{- if or (eq .Role "user") (eq .Role "system") }}<start_of_turn>user\n{{ .Content }}'
    "<end_of_turn>\n{{ if $last }}<start_of_turn>model\n{{ end }}"
    '{{- else if eq .Role "assistant" }}<start_of_turn>model\n{{ .Content }}'
    "{{ if not $last }}<end_of_turn>\n{{ end }}{{- end }}{{- end }}"
)
PHI3 = (
    "{{ if .System }}<|system|>\n{{ .System }}<|end|>\n{{ end }}{{ if .Prompt }}<|user|>\n"
    "{{ .Prompt }}<|end|>\n{{ end }}<|assistant|>\n{{ .Response }}<|end|>"
)
LLAMA2 = "[INST] <<SYS>>{{ .System }}<</SYS>>\n\n{{ .Prompt }} [/INST]"
MISTRAL = "[INST] {{ if .System }}{{ .System }}\n\n{{ end }}{{ .Prompt }}[/INST]"
ZEPHYR = (
    "{{ if .System }}<|system|>\n{{ .System }}</s>\n{{ end }}<|user|>\n{{ .Prompt }}</s>\n"
    "<|assistant|>\n"
)
# Ollama's template folder writes every role as `<|{{ .Role }}|>`.
PHI3_ROLES = (
    "{{- range .Messages }}<|{{ .Role }}|>\n{{ .Content }}<|end|>\n{{ end }}<|assistant|>\n"
)
COMMAND_R = (
    '{{- range .Messages }}<|START_OF_TURN_TOKEN|>{{- if eq .Role "user" }}<|USER_TOKEN|>'
    "{{ .Content }}{{- else }}<|CHATBOT_TOKEN|>{{ .Content }}{{- end }}<|END_OF_TURN_TOKEN|>"
    "{{- end }}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>"
)
GRANITE = (
    "{{- range .Messages }}<|start_of_role|>{{ .Role }}<|end_of_role|>{{ .Content }}"
    "<|end_of_text|>\n{{ end }}<|start_of_role|>assistant<|end_of_role|>"
)
ALPACA = (
    "{{ if .System }}{{ .System }}\n\n{{ end }}### Instruction:\n{{ .Prompt }}\n\n### Response:\n"
)


@pytest.mark.parametrize(
    ("template", "expected"),
    [
        (QWEN, "chatml"),
        (LLAMA3, "llama3"),
        (GEMMA, "gemma"),
        (PHI3, "phi3"),
        (LLAMA2, "llama2"),
        (MISTRAL, "mistral"),
        (CHAT_TEMPLATE, "chatml"),  # a GGUF's Jinja is recognised by the same markers
        (ZEPHYR, "zephyr"),  # phi3's turns, ended by </s> instead of <|end|>
        (PHI3_ROLES, "phi3"),
        (COMMAND_R, "command-r"),
        (GRANITE, "granite"),
        (ALPACA, None),
        ("{{ .Prompt }}", None),
        ("", None),
    ],
)
def test_family_by_markers(template: str, expected: str | None) -> None:
    assert family(template) == expected


@pytest.mark.parametrize(
    ("ollama", "gguf", "chat_template", "note"),
    [
        # No template in the GGUF: the family's Jinja.
        (QWEN, None, JINJA["chatml"], None),
        (GEMMA, None, JINJA["gemma"], None),
        # The GGUF's own is of the same family: it stays (it may know tools).
        (QWEN, CHAT_TEMPLATE, None, None),
        # The GGUF's own is of another family: Ollama's wins, as with Ollama.
        (LLAMA3, CHAT_TEMPLATE, JINJA["llama3"], None),
        (MISTRAL, "{{ foo }}", JINJA["mistral"], None),
        # Not recognised: the GGUF's own, or llama-server's default, with the reason.
        (ZEPHYR, CHAT_TEMPLATE, JINJA["zephyr"], None),
        (ALPACA, CHAT_TEMPLATE, None, "Ollama template not recognised ('{{ if .System }}"),
        ("{{ .Prompt }}", None, None, "; llama-server's default (ChatML) is used"),
        ("   \n", CHAT_TEMPLATE, None, "not recognised (''); the GGUF's own is used"),
    ],
)
def test_translate(
    ollama: str, gguf: str | None, chat_template: str | None, note: str | None
) -> None:
    got = translate(ollama, gguf)
    assert got.chat_template == chat_template
    if note is None:
        assert got.note is None
    else:
        assert note in (got.note or ""), got.note
        assert "\n" not in (got.note or "")  # one line in `llamactl models`
