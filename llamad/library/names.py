"""What a GGUF file's name says: its quantisation, whether it is one part of a split
model or a vision projector, and the model name llamad gives it."""

from __future__ import annotations

import re

# llama.cpp's quantisation names as they appear in file names: Q4_K_M, IQ3_XXS, q8_0,
# F16, BF16, MXFP4, TQ1_0 ... (case as written).
_QUANT = re.compile(
    r"(?:^|[-_.])((?:I?Q\d+(?:_[A-Z0-9]+)*)|(?:TQ\d_\d)|(?:B?F(?:16|32))|(?:MXFP4))(?=$|[-_.])",
    re.IGNORECASE,
)
_SPLIT = re.compile(r"^(?P<stem>.+)-(?P<part>\d{5})-of-(?P<count>\d{5})$")
# A library name: letters, digits and `._-`, with `:` before a tag and `/` between a
# namespace and a model (Ollama's and Hugging Face's names). No `..`, no leading `/`.
_NAME = re.compile(
    r"^[A-Za-z0-9][A-Za-z0-9_.+-]*(?:/[A-Za-z0-9][A-Za-z0-9_.+-]*)*(?::[A-Za-z0-9_.+-]+)?$"
)
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+-]+")
MAX_NAME = 200


def quant_of(stem: str) -> str | None:
    """The last quantisation name in a file stem, as written (`Q4_K_M`, `q8_0`), or None."""
    found = _QUANT.findall(stem)
    return found[-1] if found else None


def split_part(stem: str) -> tuple[str, int, int] | None:
    """(stem without the suffix, part, count) for `NAME-00001-of-00003`, else None."""
    m = _SPLIT.match(stem)
    if m is None:
        return None
    part, count = int(m["part"]), int(m["count"])
    return (m["stem"], part, count) if 0 < part <= count else None


def is_projector_name(stem: str) -> bool:
    """Whether a file name marks a vision projector (`mmproj-*.gguf`, `*-mmproj-f16.gguf`)."""
    return "mmproj" in stem.lower()


def file_model_name(stem: str) -> str | None:
    """The model name for a file in a plain folder: its stem, made safe, or None when
    nothing usable is left (a name of control characters, say)."""
    safe = re.sub(r"\.{2,}", ".", _UNSAFE.sub("-", stem)).strip("-.")
    return safe[:MAX_NAME] if safe and valid_name(safe[:MAX_NAME]) else None


def valid_name(name: str) -> bool:
    """Whether `name` can be a library model's name (and so a log file's and a URL's part)."""
    return len(name) <= MAX_NAME and ".." not in name and _NAME.match(name) is not None
