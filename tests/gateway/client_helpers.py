"""A gateway for the client-library tests, and what their tables check answers with."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from unittest import mock

import httpx
from gateway_helpers import Gw, gateway
from remote_helpers import write_token
from tiny_mmproj import write_tiny_mmproj

KEY = "client-tests-key-0123456789"
# A template that opens the model's reasoning: `thinking`, and no `tools`, in /api/show.
THINKING = (
    "{%- for message in messages %}<|im_start|>{{ message.role }}\n"
    "{{ message.content }}<|im_end|>\n{% endfor %}"
    "{%- if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)
AUTH = {"Authorization": f"Bearer {KEY}"}
# Two slots over 1024 tokens: each request gets 512, which the gateway must advertise.
INSTANCES = {
    "tiny": {"ctx_size": 1024, "n_parallel": 2, "aliases": ["gpt-4o-mini"]},
    "emb": {"ctx_size": 256, "n_parallel": 1, "embeddings": True, "pooling": "mean",
            "on_demand": True, "aliases": ["nomic-embed-text"]},
    # 128 a slot by the config, which llama-server raises to 256 (its figure wins once up).
    "pair": {"ctx_size": 256, "n_parallel": 2, "on_demand": True, "chat_template": THINKING},
    # Writes until stopped (context shift): a stream to break off in the middle.
    "long": {"ctx_size": 256, "n_parallel": 1, "context_shift": True, "on_demand": True},
}  # fmt: skip
# With a vision projector (tests/tiny_mmproj.py), added by `client_gateway`.
VISION = {"ctx_size": 256, "n_parallel": 1, "on_demand": True}
LISTED = {"tiny", "gpt-4o-mini", "emb", "nomic-embed-text", "pair", "long", "eyes"}
PER_REQUEST = 512
# A 1x1 PNG.
IMAGE = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQ" + (
    "DwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


@contextmanager
def client_gateway(model: Path, tmp: Path) -> Iterator[Gw]:
    """llamad with the instances above behind a gateway key; every answer the gateway
    gives meanwhile, to the clients or to httpx, must name no file of the model's (nor
    the mmproj's, in `tmp`)."""
    key = write_token(tmp / "gateway.key", KEY)
    # Beside the key, not the model: a library scan of the model's folder would take it.
    mmproj = write_tiny_mmproj(tmp / "mmproj-tiny.gguf")
    instances = {**INSTANCES, "eyes": {**VISION, "mmproj": str(mmproj)}}
    with gateway(model, instances, api_key_file=str(key)) as gw, scanned(gw) as answers:
        yield gw
    assert answers, "no answer was scanned"
    named = [
        (url, body[:300]) for url, body in answers if not no_path(gw, body) or str(tmp) in body
    ]
    assert not named, named


class _Tee(httpx.SyncByteStream):
    """An answer's body as the client reads it, kept for the scan too."""

    def __init__(self, inner: httpx.SyncByteStream, into: bytearray) -> None:
        self.inner, self.into = inner, into

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self.inner:
            self.into += chunk
            yield chunk

    def close(self) -> None:
        self.inner.close()


@contextmanager
def scanned(gw: Gw) -> Iterator[list[tuple[str, str]]]:
    """(URL, body) of every answer from the gateway while the context is open: the
    openai, ollama and anthropic clients and httpx all send through HTTPTransport."""
    bodies: list[tuple[str, bytearray]] = []
    send = httpx.HTTPTransport.handle_request

    def keep(transport: httpx.HTTPTransport, request: httpx.Request) -> httpx.Response:
        response = send(transport, request)
        if str(request.url).startswith(gw.base):
            body = bytearray()
            bodies.append((str(request.url), body))
            assert isinstance(response.stream, httpx.SyncByteStream)
            response.stream = _Tee(response.stream, body)
        return response

    answers: list[tuple[str, str]] = []
    with mock.patch.object(httpx.HTTPTransport, "handle_request", keep):
        yield answers
    answers += [(url, body.decode("utf-8", "replace")) for url, body in bodies]


def advertised(gw: Gw, name: str) -> int:
    """`num_ctx` as /api/show gives it."""
    shown = httpx.post(f"{gw.base}/api/show", json={"model": name}, headers=AUTH, timeout=10)
    params = shown.json()["parameters"].splitlines()
    return int(next(p.split()[1] for p in params if p.startswith("num_ctx ")))


def refused(gw: Gw, routes: list[tuple[str, str, int]], headers: dict[str, str]) -> list[Any]:
    """The bodies of the answers to (method, path, status) each, checked for that status."""
    bodies = []
    for method, path, status in routes:
        answer = httpx.request(method, gw.base + path, headers=headers, timeout=10)
        assert answer.status_code == status, (method, path, answer.text)
        bodies.append(answer.json())
    return bodies


def prompt_of(tokens: int) -> str:
    """A raw prompt of exactly `tokens` tokens for the tiny model (BOS, then a token a byte)."""
    return "a" * (tokens - 1)


# A client's own schema: enforced as it is, it makes the tiny model write `{"a": bool}`.
SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "boolean"}},
    "required": ["a"],
    "additionalProperties": False,
}


def follows_schema(text: str) -> bool:
    """`text` is what SCHEMA allows."""
    doc = json.loads(text)
    return isinstance(doc, dict) and set(doc) == {"a"} and isinstance(doc["a"], bool)


def finished_json(answer: Callable[[int], tuple[str, bool]]) -> Any:
    """The first JSON-mode answer (seed 0, 1, ...) the tiny model finishes before its
    token limit, which must parse; every answer before it must be a JSON prefix."""
    for seed in range(12):
        text, finished = answer(seed)
        assert is_json_prefix(text), text
        if finished:
            return json.loads(text)
    raise AssertionError("the model finished no JSON answer in 12 tries")


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
