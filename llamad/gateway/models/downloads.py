"""A model still being pulled: 503 `downloading` with the progress so far and Retry-After,
never a load of half a file, on every route family (OpenAI's and Ollama's).

Asked only once a name has matched no model (the miss path), so a routed request pays
nothing for it.
"""

from __future__ import annotations

from llamad.gateway.contract.port import GatewayError
from llamad.library.pulls import Pulls


class Downloading(GatewayError):
    """The model is being pulled into the library; it answers once the pull ends."""

    code = "downloading"
    retry_after = 5.0


def downloading(pulls: Pulls | None, name: str) -> Downloading | None:
    """The 503 for `name` when a pull of it is under way, else None."""
    pull = pulls.downloading(name) if pulls is not None else None
    if pull is None:
        return None
    done, total = pull.progress()
    progress = f" ({100 * done // total}%: {done} of {total} bytes)" if total else ""
    return Downloading(f"model {name!r} is downloading{progress}; retry shortly")
