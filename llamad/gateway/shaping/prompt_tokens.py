"""The echoed prompt's tokens in `logprobs`, for `echo` with `logprobs` on /v1/completions.

llama-server computes no probabilities for a prompt's tokens (llama.cpp #27174; the
pull requests that would add them, #15189 and #27537, are not merged), so each echoed
token comes with a null `logprob`, as OpenAI's legacy API gives the first token of an
echoed prompt, and the generated tokens follow with theirs. The tokens are llama-server's
own (`/tokenize` with pieces), in the shape it gives the generated ones.
"""

from __future__ import annotations

from typing import Any

TOKENIZE = "/tokenize"


def tokenize_body(prompt: str) -> dict[str, Any]:
    """What `/tokenize` is asked for the prompt's tokens: as the completion reads it."""
    return {"content": prompt, "with_pieces": True}


def entries(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """`/tokenize`'s answer as logprobs entries, each with a null logprob."""
    out = []
    for token in answer.get("tokens") or []:
        if not isinstance(token, dict):
            continue
        piece = token.get("piece")
        raw = bytes(piece) if isinstance(piece, list) else str(piece or "").encode()
        out.append({
            "id": token.get("id"), "token": raw.decode("utf-8", "replace"), "bytes": list(raw),
            "logprob": None, "top_logprobs": None,
        })  # fmt: skip
    return out


def with_prompt(logprobs: Any, prompt: list[dict[str, Any]]) -> dict[str, Any]:
    """A choice's (or a stream chunk's) `logprobs` with the prompt's entries first."""
    content = logprobs.get("content") if isinstance(logprobs, dict) else None
    return {**(logprobs or {}), "content": [*prompt, *(content or [])]}


def asked(doc: dict[str, Any]) -> bool:
    """Whether a completions request asks for logprobs (an int, legacy; or true)."""
    value = doc.get("logprobs")
    return value is True or (isinstance(value, int) and not isinstance(value, bool) and value > 0)
