"""`[library]`: where models already on disk are found, and how they are served.

Structure only, as in `schema.py`; `library_specs.py` scans the folders and turns each
model into an on-demand instance.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, NonNegativeFloat, field_validator

from llamad.library.ports import parse_range

Scalar = str | int | float | bool


class LibrarySettings(BaseModel):
    """`[library]` as written in the file."""

    model_config = ConfigDict(extra="forbid")

    # Off: only [instances]. Without a [library] table the library is on when the gateway
    # is (nothing else routes to on-demand models).
    enabled: bool = True
    # None: ~/models plus Ollama's, LM Studio's and the Hugging Face cache where they exist.
    dirs: list[str] | None = None
    pull_dir: str = "~/models"  # Ollama-registry pulls land in <pull_dir>/.ollama
    ports: str = "20000-20999"
    idle_timeout: NonNegativeFloat = 300.0  # Ollama's keep_alive default: 5 minutes
    ollama_registry: str = "https://registry.ollama.ai"
    defaults: dict[str, Scalar | list[Scalar]] = {}

    @field_validator("ports")
    @classmethod
    def _ports(cls, value: str) -> str:
        parse_range(value)
        return value

    @field_validator("ollama_registry")
    @classmethod
    def _registry(cls, value: str) -> str:
        if not value.startswith(("http://", "https://")):
            raise ValueError(f"must be an http:// or https:// URL (got {value!r})")
        return value.rstrip("/")
