"""A restore that pays, through a real daemon's gateway: a turn, a restart of its model
(the slot saved, then restored), and the same conversation's next turn."""

from __future__ import annotations

from typing import Any

import httpx
from gateway_helpers import Gw

TALK = [{"role": "user", "content": "Tell me everything about the sea. " * 10}]


def restart_between_turns(gw: Gw, model: str) -> dict[str, Any]:
    """One turn, a restart of `model`, and the next turn; that turn's `timings`."""
    first = _chat(gw, model, TALK)
    gw.ld.api("POST", f"/v1/instances/{model}/restart?wait=60", timeout=70)
    said = first["choices"][0]["message"]["content"]
    later = [*TALK, {"role": "assistant", "content": said}, {"role": "user", "content": "More."}]
    timings: dict[str, Any] = _chat(gw, model, later)["timings"]
    return timings


def _chat(gw: Gw, model: str, messages: list[dict[str, str]]) -> dict[str, Any]:
    body = {"model": model, "messages": messages, "max_tokens": 4, "temperature": 0}
    reply = httpx.post(f"{gw.base}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    return dict(reply.json())
