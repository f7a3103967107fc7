"""A gateway for the client-library tests, and what their tables check answers with."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
from gateway_helpers import Gw, gateway
from remote_helpers import write_token

KEY = "client-tests-key-0123456789"
AUTH = {"Authorization": f"Bearer {KEY}"}
# Two slots over 1024 tokens: each request gets 512, which the gateway must advertise.
INSTANCES = {
    "tiny": {"ctx_size": 1024, "n_parallel": 2, "aliases": ["gpt-4o-mini"]},
    "emb": {"ctx_size": 256, "n_parallel": 1, "embeddings": True, "pooling": "mean",
            "on_demand": True, "aliases": ["nomic-embed-text"]},
    # 128 a slot by the config, which llama-server raises to 256 (its figure wins once up).
    "pair": {"ctx_size": 256, "n_parallel": 2, "on_demand": True},
}  # fmt: skip
PER_REQUEST = 512
# A 1x1 PNG.
IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ" + (
    "DwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@contextmanager
def client_gateway(model: Path, tmp: Path) -> Iterator[Gw]:
    """llamad with the instances above behind a gateway key."""
    key = write_token(tmp / "gateway.key", KEY)
    with gateway(model, INSTANCES, api_key_file=str(key)) as gw:
        yield gw


def advertised(gw: Gw, name: str) -> int:
    """`num_ctx` as /api/show gives it."""
    shown = httpx.post(f"{gw.base}/api/show", json={"model": name}, headers=AUTH, timeout=10)
    params = shown.json()["parameters"].splitlines()
    return int(next(p.split()[1] for p in params if p.startswith("num_ctx ")))


def prompt_of(tokens: int) -> str:
    """A raw prompt of exactly `tokens` tokens for the tiny model (BOS, then a token a byte)."""
    return "a" * (tokens - 1)


def is_json_prefix(text: str) -> bool:
    """Whether `text` is JSON, or the start of some JSON (cut by max_tokens)."""
    closers: list[str] = []
    in_string = escaped = False
    for ch in text:
        if in_string:
            escaped, in_string = (False, True) if escaped else (ch == "\\", ch != '"')
        elif ch == '"':
            in_string = True
        elif ch in "{[":
            closers.append("}" if ch == "{" else "]")
        elif ch in "}]" and (not closers or closers.pop() != ch):
            return False
    head = text + ("n" if escaped else "") + ('"' if in_string else "")
    tail = "".join(reversed(closers))
    literals = {w[i:] for w in ("true", "false", "null") for i in range(1, len(w))}
    for filler in ("", "0", ":0", '"":0', *literals):
        try:
            json.loads(head + filler + tail)
            return True
        except ValueError:
            continue
    return False


def no_path(gw: Gw, text: str) -> bool:
    """The answer names no file of the model's."""
    return str(gw.model) not in text and str(gw.model.parent) not in text
