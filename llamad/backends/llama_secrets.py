"""The secrets of a llama-server instance's settings: its API keys, inline or in a key
file held to the token files' rule, and the values its log must never show."""

from __future__ import annotations

from pathlib import Path

from llamad.backends.base import Problem
from llamad.common.tokenfile import TokenFileError, check_private

API_KEY_ENV = "LLAMA_API_KEY"
SECRET_ENVS = {API_KEY_ENV, "HF_TOKEN"}


def llama_secrets(settings: dict[str, str], problem: Problem) -> tuple[tuple[str, ...], str | None]:
    """Every value to blank out of the log, and the API key llamad itself presents."""
    # llama-server takes a comma-separated list of keys, or one key a line from the file.
    keys = [k.strip() for k in settings.get(API_KEY_ENV, "").split(",") if k.strip()]
    key_file = settings.get("LLAMA_ARG_API_KEY_FILE")
    if key_file:
        try:
            lines = Path(key_file).read_text(encoding="utf-8").splitlines()
            keys += [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
            # Held to the token files' rule: keys other users can read are leaked.
            check_private(Path(key_file))
        except OSError as exc:
            problem(("api_key_file",), f"cannot read key file {key_file}: {exc.strerror}")
        except TokenFileError as exc:
            problem(("api_key_file",), str(exc))
    secrets = [settings[e] for e in sorted(SECRET_ENVS) if settings.get(e)] + keys
    return tuple(dict.fromkeys(secrets)), keys[0] if keys else None
