"""An Ollama model's template (a Go text/template) as a chat template llama-server runs.

Ollama's templates are Go templates; llama-server runs Jinja. Rather than interpret Go
templates, the family is recognised by the turn markers it writes (`<|im_start|>` is
ChatML, `<|start_header_id|>` Llama 3, ...) and that family's Jinja template is given to
llama-server. A GGUF whose own template is of the same family keeps its own: it is the
richer one (tools, reasoning). A template of no known family leaves the GGUF's template
in use, and says so.
"""

from __future__ import annotations

from dataclasses import dataclass

# Markers, most specific first: a template is of the first family whose markers it has.
_MARKERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("llama3", ("<|start_header_id|>", "<|eot_id|>")),
    ("chatml", ("<|im_start|>", "<|im_end|>")),
    ("gemma", ("<start_of_turn>", "<end_of_turn>")),
    ("command-r", ("<|START_OF_TURN_TOKEN|>", "<|USER_TOKEN|>")),
    ("granite", ("<|start_of_role|>", "<|end_of_role|>")),
    # Ollama's own write `<|{{ .Role }}|>`: the assistant's turn is the one spelled out.
    ("phi3", ("<|assistant|>", "<|end|>")),
    ("zephyr", ("<|assistant|>", "</s>")),
    ("llama2", ("[INST]", "<<SYS>>")),
    ("mistral", ("[INST]", "[/INST]")),
)

_FIRST_SYSTEM = "loop.index0 == 1 and messages[0].role == 'system'"

# Each family's turns in Jinja (messages, add_generation_prompt), as Ollama's own
# template for that family lays them out; llama-server adds the BOS token itself.
JINJA: dict[str, str] = {
    "chatml": (
        "{%- for message in messages %}<|im_start|>{{ message.role }}\n"
        "{{ message.content }}<|im_end|>\n{% endfor %}"
        "{%- if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    ),
    "llama3": (
        "{%- for message in messages %}<|start_header_id|>{{ message.role }}"
        "<|end_header_id|>\n\n{{ message.content }}<|eot_id|>{% endfor %}"
        "{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n"
        "{% endif %}"
    ),
    # Gemma has no system turn: the system prompt opens the first user turn, as in
    # Google's template and Ollama's gemma3.
    "gemma": (
        "{%- for message in messages %}{%- if message.role != 'system' %}<start_of_turn>"
        "{{ 'model' if message.role == 'assistant' else 'user' }}\n"
        "{% if " + _FIRST_SYSTEM + " %}{{ messages[0].content }}\n\n{% endif %}"
        "{{ message.content }}<end_of_turn>\n{% endif %}{% endfor %}"
        "{%- if add_generation_prompt %}<start_of_turn>model\n{% endif %}"
    ),
    # Cohere's turns; a tool's result is a system turn, as in Ollama's template.
    "command-r": (
        "{%- for message in messages %}<|START_OF_TURN_TOKEN|>"
        "{%- if message.role == 'user' %}<|USER_TOKEN|>"
        "{%- elif message.role == 'assistant' %}<|CHATBOT_TOKEN|>"
        "{%- else %}<|SYSTEM_TOKEN|>{% endif %}{{ message.content }}<|END_OF_TURN_TOKEN|>"
        "{%- endfor %}"
        "{%- if add_generation_prompt %}<|START_OF_TURN_TOKEN|><|CHATBOT_TOKEN|>{% endif %}"
    ),
    "granite": (
        "{%- for message in messages %}<|start_of_role|>{{ message.role }}<|end_of_role|>"
        "{{ message.content }}<|end_of_text|>\n{% endfor %}"
        "{%- if add_generation_prompt %}<|start_of_role|>assistant<|end_of_role|>{% endif %}"
    ),
    "phi3": (
        "{%- for message in messages %}<|{{ message.role }}|>\n"
        "{{ message.content }}<|end|>\n{% endfor %}"
        "{%- if add_generation_prompt %}<|assistant|>\n{% endif %}"
    ),
    "zephyr": (
        "{%- for message in messages %}<|{{ message.role }}|>\n"
        "{{ message.content }}</s>\n{% endfor %}"
        "{%- if add_generation_prompt %}<|assistant|>\n{% endif %}"
    ),
    "llama2": (
        "{%- for message in messages %}{%- if message.role == 'user' %}[INST] "
        "{% if " + _FIRST_SYSTEM + " %}<<SYS>>\n{{ messages[0].content }}\n<</SYS>>\n\n"
        "{% endif %}{{ message.content }} [/INST]"
        "{%- elif message.role == 'assistant' %} {{ message.content }}</s><s>{% endif %}"
        "{%- endfor %}"
    ),
    "mistral": (
        "{%- for message in messages %}{%- if message.role == 'user' %}[INST] "
        "{% if " + _FIRST_SYSTEM + " %}{{ messages[0].content }}\n\n{% endif %}"
        "{{ message.content }}[/INST]"
        "{%- elif message.role == 'assistant' %} {{ message.content }}</s>{% endif %}"
        "{%- endfor %}"
    ),
}


@dataclass(frozen=True)
class Translation:
    """What llama-server is given for an Ollama template, and the line to list."""

    chat_template: str | None = None  # Jinja for llama-server; None: the GGUF's own
    note: str | None = None  # why the Ollama template is not the one in use


def family(template: str) -> str | None:
    """The chat family whose turn markers `template` writes, or None."""
    for name, markers in _MARKERS:
        if all(m in template for m in markers):
            return name
    return None


def translate(ollama: str, gguf: str | None) -> Translation:
    """The chat template for a model whose Ollama template is `ollama` and whose GGUF
    carries `gguf` (None: none)."""
    wanted = family(ollama)
    if wanted is None:
        first = ollama.strip().splitlines()[0][:60] if ollama.strip() else ""
        used = "the GGUF's own" if gguf is not None else "llama-server's default (ChatML)"
        return Translation(note=f"Ollama template not recognised ({first!r}); {used} is used")
    if gguf is not None and family(gguf) == wanted:
        return Translation()
    return Translation(chat_template=JINJA[wanted])
