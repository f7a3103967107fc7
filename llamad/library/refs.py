"""What a pull names: a Hugging Face GGUF (`hf.co/user/repo:Q4_K_M`,
`hf.co/user/repo/file.gguf`, `user/repo:Q4_K_M`) or an Ollama registry model
(`llama3.2`, `qwen2.5:7b`, `registry.ollama.ai/user/model:tag`)."""

from __future__ import annotations

import re
from dataclasses import dataclass

from llamad.library.names import quant_of

DEFAULT_QUANT = "Q4_K_M"  # what Ollama pulls for hf.co/USER/REPO with no tag
_HF_HOSTS = ("hf.co/", "huggingface.co/")
_PART = r"[A-Za-z0-9][A-Za-z0-9_.-]*"
_HF = re.compile(
    rf"^(?P<repo>{_PART}/{_PART})(?:/(?P<file>[^:]+\.gguf)|:(?P<quant>[A-Za-z0-9_.-]+))?$"
)
_OLLAMA = re.compile(
    rf"^(?:(?P<host>[a-z0-9.-]+\.[a-z]+(?::\d+)?)/)?(?:(?P<ns>{_PART})/)?(?P<model>{_PART})"
    r"(?::(?P<tag>[A-Za-z0-9_.-]+))?$"
)


class RefError(ValueError):
    """A name that is neither a Hugging Face nor an Ollama model reference."""


@dataclass(frozen=True)
class HfRef:
    """A GGUF in a Hugging Face repo: by quantisation (None: Q4_K_M, as Ollama) or file."""

    repo: str
    quant: str | None = None
    file: str | None = None

    @property
    def name(self) -> str:
        """The library name the pulled model answers to: the hub cache's scan names it
        after the file's quantisation, and gives the repo's own name to its Q4_K_M (or
        its only model), which is what a pull with no quant picks."""
        if self.file is not None:
            stem = self.file.rsplit("/", 1)[-1][: -len(".gguf")]
            return f"{self.repo}:{quant_of(stem) or stem}"
        return f"{self.repo}:{self.quant}" if self.quant else self.repo

    @property
    def key(self) -> str:
        """What every spelling of this model shares: the repo and the quant, any case,
        Q4_K_M when none is named (`hf.co/u/r`, `u/r:latest`, `u/r:q4_k_m` are one)."""
        tag = self.name.rsplit(":", 1)[1] if self.file is not None else self.quant
        return f"hf:{self.repo}:{tag or DEFAULT_QUANT}".casefold()


@dataclass(frozen=True)
class OllamaRef:
    """A model in Ollama's registry."""

    namespace: str
    model: str
    tag: str

    @property
    def name(self) -> str:
        """Ollama's display name: `library/` dropped, `:latest` implied."""
        base = self.model if self.namespace == "library" else f"{self.namespace}/{self.model}"
        return base if self.tag == "latest" else f"{base}:{self.tag}"

    @property
    def key(self) -> str:
        """What every spelling of this model shares (`:latest` implied, any case)."""
        return f"ollama:{self.name}".casefold()


def parse(ref: str) -> HfRef | OllamaRef:
    """`ref` as a pull source; RefError says which forms there are."""
    text = ref.strip()
    for host in _HF_HOSTS:
        if text.lower().startswith(host):
            return _hf(text[len(host) :], ref)
    m = _OLLAMA.match(text)
    if m and m["host"] is None and m["ns"] is not None:
        return _hf(text, ref)  # user/repo[:quant]: a Hugging Face repo, as Ollama reads it
    if m is None:
        raise RefError(
            f"cannot pull {ref!r}: give an Ollama name (llama3.2, qwen2.5:7b) or a Hugging Face "
            "GGUF (hf.co/USER/REPO:QUANT, hf.co/USER/REPO/FILE.gguf, USER/REPO:QUANT)"
        )
    return OllamaRef(m["ns"] or "library", m["model"], m["tag"] or "latest")


def _hf(rest: str, ref: str) -> HfRef:
    m = _HF.match(rest)
    if m is None:
        raise RefError(
            f"cannot pull {ref!r}: a Hugging Face GGUF is USER/REPO:QUANT or USER/REPO/FILE.gguf"
        )
    quant = m["quant"]
    return HfRef(m["repo"], None if quant in (None, "latest") else quant, m["file"])
