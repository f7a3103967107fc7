"""The environment a config depends on, captured at install: launchd passes a job none of
the shell's variables, and systemd's user manager only its own, so where models and caches
are found would silently change under the service.

The config itself reads no variable (the file is the only source); what does are the
places llamad and llama-server look by default: the Hugging Face cache (`HF_HOME`,
`HF_HUB_CACHE`), Ollama's store (`OLLAMA_MODELS`), llama-server's own download cache
(`LLAMA_CACHE`) and the XDG base directories (the default config, state and cache).
None of them is a secret: the plist and the unit file are world-readable.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

CAPTURED = (
    "HF_HOME",
    "HF_HUB_CACHE",
    "OLLAMA_MODELS",
    "LLAMA_CACHE",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_STATE_HOME",
    "XDG_CACHE_HOME",
)


def capture(environ: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """(the variables to set in the job, warnings about those that cannot be carried)."""
    kept: dict[str, str] = {}
    warnings: list[str] = []
    for name in CAPTURED:
        value = environ.get(name, "")
        if not value:
            continue
        path = os.path.expanduser(value)
        if not os.path.isabs(path):
            warnings.append(
                f"{name}={value} is not an absolute path, so the service does not get it "
                "(it starts in another directory); set it to an absolute path and install again"
            )
            continue
        kept[name] = path
    unset = [name for name in CAPTURED if not environ.get(name)]
    if environ.get("SUDO_USER") and unset:
        warnings.append(
            f"sudo cleared the environment, so {', '.join(unset)} are not carried into the "
            "service; if your shell sets any, install with sudo -E"
        )
    return kept, warnings
