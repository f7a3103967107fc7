"""llamad serving the real small model (gemma-3-270m) behind its gateway, for the tests
where what the model answers matters: small context, two threads, one slot."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from helpers import Llamad, free_port, short_dir, wait_for, write_config

# What a question to the model needs; the answers are a few tokens at temperature 0.
GEMMA = {"ctx_size": 1024, "n_parallel": 1, "threads": 2}
# The schema every structured-output test asks for, and what it must parse into.
CITY = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "country": {"type": "string"}},
    "required": ["city", "country"],
    "additionalProperties": False,
}
ASK = "What is the capital of France? Answer in JSON."


def is_city(doc: Any) -> bool:
    """`doc` is what CITY allows."""
    return (
        isinstance(doc, dict)
        and set(doc) == {"city", "country"}
        and all(isinstance(v, str) for v in doc.values())
    )


@contextmanager
def gemma_gateway(
    model: Path, template: Path, daemon: dict[str, Any] | None = None, **keys: Any
) -> Iterator[tuple[str, Llamad]]:
    """The gateway's base URL (no key) and the daemon, `gemma` running (`keys` over
    GEMMA's, `daemon`'s over `[daemon]`'s)."""
    d = short_dir()
    port = free_port()
    table = {"model": model, "port": free_port(), "chat_template_file": template, **GEMMA}
    table |= keys
    cfg = write_config(
        d / "llamad.toml",
        {"gemma": table},
        daemon={"state_dir": str(d / "state"), **(daemon or {})},
        gateway={"listen": f"127.0.0.1:{port}"},
    )
    base = f"http://127.0.0.1:{port}"
    with Llamad(cfg) as ld:
        ld.wait_ready()
        ld.wait_running("gemma", 120)  # a load on a busy machine
        wait_for(lambda: httpx.get(f"{base}/health", timeout=2).status_code == 200, 10)
        yield base, ld
        assert ld.stop() == 0


def activity(base: str) -> list[dict[str, Any]]:
    """The gateway's activity records, newest first."""
    return list(httpx.get(f"{base}/v1/activity", timeout=5).json()["data"])
