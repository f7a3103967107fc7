"""What a GGUF file's header says about its model: the one reader of GGUF metadata in llamad.

The header is scanned once (`gguf_header`, with the `gguf` package's constants) and cached
by path, size and mtime, so the gateway's listings and memory estimates never parse a
multi-gigabyte file twice. Only the numbers and strings that llamad uses are kept.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llamad.backends.gguf_header import ArrayRef, array_string, scan, strings_present
from llamad.backends.gguf_types import file_type_name

# Token ids that mark fill-in-the-middle support, by the role llama-server gives them.
_FIM_KEYS = ("fim_pre", "fim_suf", "fim_mid")


@dataclass(frozen=True)
class GGUFMeta:
    """A model's header facts. Numbers the file lacks are None."""

    path: Path
    size_bytes: int
    mtime_ns: int
    architecture: str
    name: str | None = None
    basename: str | None = None
    size_label: str | None = None
    context_length: int | None = None
    block_count: int | None = None
    embedding_length: int | None = None
    head_count: int | None = None
    head_count_kv: int | None = None
    key_length: int | None = None
    value_length: int | None = None
    file_type: int | None = None
    parameter_count: int = 0
    chat_template: str | None = None
    pooling_type: int | None = None
    fim_token_ids: dict[str, int] = field(default_factory=dict)
    # The texts of the end-of-sequence and end-of-turn tokens: what generation stops on.
    stop_tokens: tuple[str, ...] = ()
    # Where the vocabulary's token texts sit in the file (`has_tokens` searches it).
    vocab: ArrayRef | None = None
    # Every scalar key/value of the header, small numeric arrays as lists (the vocabulary
    # and other large arrays left out).
    scalars: dict[str, Any] = field(default_factory=dict)

    @property
    def quantization(self) -> str:
        """The file type as llama.cpp names it (e.g. "Q4_K_M", "F16"), or "unknown"."""
        return file_type_name(self.file_type) or "unknown"

    @property
    def has_fim(self) -> bool:
        """Whether the model has the prefix, suffix and middle tokens that /infill needs."""
        return all(k in self.fim_token_ids for k in _FIM_KEYS)

    @property
    def head_dims(self) -> tuple[int | None, int | None]:
        """Key and value lengths per head, falling back to embedding / heads as llama.cpp does."""
        fallback = None
        if self.embedding_length and self.head_count:
            fallback = self.embedding_length // self.head_count
        return (self.key_length or fallback, self.value_length or fallback)


_cache: dict[tuple[Path, int, int], GGUFMeta] = {}
# `has_tokens`' answers, by file as it is and the texts asked for.
_present: dict[tuple[Path, int, int, tuple[str, ...]], frozenset[str]] = {}
_lock = threading.Lock()


def cached_gguf_meta(path: Path) -> GGUFMeta | None:
    """The header facts if they are cached for the file as it is now (no reading, no wait)."""
    path = Path(path).expanduser()
    try:
        st = path.stat()
    except OSError:
        return None
    with _lock:
        return _cache.get((path, st.st_size, st.st_mtime_ns))


def header_of(model: Path | None) -> GGUFMeta | None:
    """`read_gguf_meta(model)`, or None for no model or a file it cannot read."""
    if model is None:
        return None
    try:
        return read_gguf_meta(model)
    except (OSError, ValueError):
        return None


def read_gguf_meta(path: Path) -> GGUFMeta:
    """The header facts of the GGUF file at `path` (cached until the file changes).

    Raises OSError when the file cannot be read and ValueError when it is not a GGUF file.
    """
    path = Path(path).expanduser()
    st = path.stat()
    key = (path, st.st_size, st.st_mtime_ns)
    with _lock:
        cached = _cache.get(key)
    if cached is not None:
        return cached
    try:
        meta = _parse(path, st.st_size, st.st_mtime_ns)
    except ValueError as exc:
        raise ValueError(f"{path}: not a readable GGUF file ({exc})") from exc
    with _lock:
        # One entry per path: a rewritten model replaces the stale one.
        for old in [k for k in _cache if k[0] == path]:
            del _cache[old]
        _cache[key] = meta
    return meta


def _parse(path: Path, size: int, mtime_ns: int) -> GGUFMeta:
    header = scan(path)
    scalars = header.scalars
    arch = str(scalars.get("general.architecture", "unknown"))

    def num(key: str) -> int | None:
        value = scalars.get(key.format(arch=arch))
        if isinstance(value, list) and value:
            value = max(value)  # per-layer values: the largest layer bounds the KV cache
        if isinstance(value, bool) or not isinstance(value, int | float):
            return None
        return int(value)

    def text(key: str) -> str | None:
        value = scalars.get(key)
        return value if isinstance(value, str) else None

    fim = {
        role: int(scalars[f"tokenizer.ggml.{role}_token_id"])
        for role in (*_FIM_KEYS, "fim_pad", "fim_rep", "fim_sep")
        if f"tokenizer.ggml.{role}_token_id" in scalars
    }
    stops: list[str] = []
    vocab = header.arrays.get("tokenizer.ggml.tokens")
    for key in ("tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id"):
        token_id = scalars.get(key)
        if vocab is not None and isinstance(token_id, int):
            token = array_string(path, vocab, token_id)
            if token is not None and token not in stops:
                stops.append(token)
    return GGUFMeta(
        path=path,
        size_bytes=size,
        mtime_ns=mtime_ns,
        architecture=arch,
        name=text("general.name"),
        basename=text("general.basename"),
        size_label=text("general.size_label"),
        context_length=num("{arch}.context_length"),
        block_count=num("{arch}.block_count"),
        embedding_length=num("{arch}.embedding_length"),
        head_count=num("{arch}.attention.head_count"),
        head_count_kv=num("{arch}.attention.head_count_kv"),
        key_length=num("{arch}.attention.key_length"),
        value_length=num("{arch}.attention.value_length"),
        file_type=num("general.file_type"),
        parameter_count=sum(header.tensor_elements),
        chat_template=text("tokenizer.chat_template"),
        pooling_type=num("{arch}.pooling_type"),
        fim_token_ids=fim,
        stop_tokens=tuple(stops),
        vocab=vocab,
        scalars=scalars,
    )


def has_tokens(meta: GGUFMeta, texts: tuple[str, ...]) -> frozenset[str]:
    """Which of `texts` are tokens of the model's vocabulary: read from the file only
    when asked (a vocabulary can have 150k entries), once per file as it is, since every
    status document asks again. OSError or ValueError as the file's."""
    if meta.vocab is None:
        return frozenset()
    key = (meta.path, meta.size_bytes, meta.mtime_ns, texts)
    with _lock:
        found = _present.get(key)
    if found is None:
        found = strings_present(meta.path, meta.vocab, texts)
        with _lock:
            for old in [k for k in _present if k[0] == meta.path and k[1:3] != key[1:3]]:
                del _present[old]
            _present[key] = found
    return found


def parameter_size(count: int) -> str:
    """A parameter count the way Ollama prints it: "7.6B", "494.03M", "1.2K"."""
    for unit, scale in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if count >= scale:
            return f"{count / scale:.2f}".rstrip("0").rstrip(".") + unit
    return str(count)
