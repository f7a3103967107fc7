"""The chat template a GGUF without one runs with: its architecture's (for `llama`,
its vocabulary's), shipped with llamad (`llamad/chat_templates/`), as llama-server's
`--chat-template-file`.

llama-server falls back to ChatML for a model that carries no template, and a Gemma
then answers nonsense; its built-in names (`--chat-template gemma`) are no answer
either: with Jinja on, the name is taken as a template's text. Many converted and
quantized files carry none. The table's own template always wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from llamad.backends.gguf_meta import GGUFMeta, has_tokens, read_gguf_meta

TEMPLATE_ENVS = ("LLAMA_ARG_CHAT_TEMPLATE", "LLAMA_ARG_CHAT_TEMPLATE_FILE")
TEMPLATE_FLAGS = ("--chat-template", "--chat-template-file")
# GGUF architectures and the template family their models are trained on.
_FAMILIES = {
    "gemma": "gemma", "gemma2": "gemma", "gemma3": "gemma", "gemma3n": "gemma",
    "qwen2": "chatml", "qwen2moe": "chatml", "qwen3": "chatml", "qwen3moe": "chatml",
    "phi3": "phi3",
}  # fmt: skip
# Architectures whose models differ in turns (Llama 2, Llama 3 and Mistral are all
# `llama`): the vocabulary's special tokens tell which. Llama 2 and Mistral before v0.3
# spell [INST] in plain text, so they have no token that tells, and get no built-in.
_BY_VOCAB = frozenset({"llama", "mistral3", "mistral4"})
# Family, the tokens it needs, the tokens it must not have.
_MARKERS = (
    ("llama3", ("<|start_header_id|>", "<|eot_id|>"), ()),
    ("mistral", ("[INST]",), ("<|start_header_id|>",)),
)
_MARKER_TOKENS = ("<|start_header_id|>", "<|eot_id|>", "[INST]")
# What status says of a template the instance's table sets, or the GGUF carries: nothing
# the page or `llamactl models` need to point out.
OWN_LINES = ("the instance's own", "the model's own")


@dataclass(frozen=True)
class Choice:
    """The template an instance runs with when it sets none: `file` a built-in one
    (None: the GGUF's own, or none), `line` what status says of it."""

    file: Path | None
    line: str


def template_file(family: str) -> Path:
    """The shipped Jinja file of `family`."""
    return Path(str(resources.files("llamad").joinpath(f"chat_templates/{family}.jinja")))


def choose(model: Path | None) -> Choice | None:
    """For an instance that sets no template: its GGUF's own (None), else its
    architecture's built-in one, else a line saying it has none."""
    if model is None or not model.is_file():
        return None  # a hub model or one not downloaded yet: llama-server reads it
    try:
        meta = read_gguf_meta(model)
    except (OSError, ValueError):
        return None
    if meta.chat_template:
        return None
    try:
        family = _family(meta)
    except (OSError, ValueError):
        family = None
    if family is None:
        line = f"none: the model carries no chat template ({meta.architecture}); ChatML is used"
        return Choice(None, line)
    return Choice(template_file(family), f"built-in {family} (the model carries none)")


def vocab_family(tokens: frozenset[str]) -> str | None:
    """The template family a vocabulary's special `tokens` mark, or None."""
    for family, needed, excluded in _MARKERS:
        if tokens.issuperset(needed) and tokens.isdisjoint(excluded):
            return family
    return None


def _family(meta: GGUFMeta) -> str | None:
    if meta.architecture in _BY_VOCAB:
        return vocab_family(has_tokens(meta, _MARKER_TOKENS))
    return _FAMILIES.get(meta.architecture)


def describe(settings: dict[str, str], args: tuple[str, ...], model: Path | None) -> str | None:
    """One line on the template an instance runs with, for status (None: not known
    before the model is on disk)."""
    file = settings.get("LLAMA_ARG_CHAT_TEMPLATE_FILE")
    if file and Path(file).parent == template_file("gemma").parent:
        return f"built-in {Path(file).stem} (the model carries none)"
    flags = {a.split("=", 1)[0].strip() for a in args}
    if file or settings.get("LLAMA_ARG_CHAT_TEMPLATE") or flags & set(TEMPLATE_FLAGS):
        return OWN_LINES[0]
    chosen = choose(model)
    if chosen is not None:
        return chosen.line
    return OWN_LINES[1] if model is not None and model.is_file() else None


def worth_saying(line: str | None) -> str | None:
    """`line` when it tells of a template the model does not carry (a built-in one, or
    none at all): the page and `llamactl models` show those, and no other."""
    return line if line is not None and line not in OWN_LINES else None
