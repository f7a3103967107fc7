"""What the gateway presents to an instance that has its own key."""

from __future__ import annotations

import functools
from pathlib import Path

from llamad.backends.spec import InstanceSpec


@functools.lru_cache(maxsize=256)
def instance_auth(spec: InstanceSpec) -> tuple[tuple[str, str], ...]:
    """The instance's own key, as llama-server takes it (the first of LLAMA_API_KEY, else
    the first line of its key file); read once per spec, not per request."""
    settings = dict(spec.settings)
    key = settings.get("LLAMA_API_KEY", "").split(",")[0].strip()
    if not key and settings.get("LLAMA_ARG_API_KEY_FILE"):
        try:
            lines = Path(settings["LLAMA_ARG_API_KEY_FILE"]).read_text().splitlines()
        except OSError:
            lines = []
        key = next((ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")), "")
    return (("Authorization", f"Bearer {key}"),) if key else ()
