"""What a llama-server instance serves, read from its LLAMA_* settings (see serving.py)."""

from __future__ import annotations

from pathlib import Path

from llamad.backends.serving import Serving

ALIAS_ENV = "LLAMA_ARG_ALIAS"
AUTO_SLOTS = 4  # what llama-server takes when the number of slots is left to it
# llama-server's truthy values, exactly (its --help): anything else is false.
_TRUE = {"on", "enabled", "true", "1"}
_FALSE = {"off", "disabled", "false", "0"}
SLOTS_ENV = "LLAMA_ARG_ENDPOINT_SLOTS"  # --slots / --no-slots


def llama_serving(settings: dict[str, str]) -> Serving:
    """The `Serving` of an instance whose environment is `settings`."""
    alias = settings.get(ALIAS_ENV, "")
    pooling = settings.get("LLAMA_ARG_POOLING", "")
    template = settings.get("LLAMA_ARG_CHAT_TEMPLATE")
    template_file = settings.get("LLAMA_ARG_CHAT_TEMPLATE_FILE")
    return Serving(
        # llama-server names the model by its first alias, else by the GGUF path.
        answer_name=alias.split(",")[0].strip() or settings.get("LLAMA_ARG_MODEL"),
        embeddings=_true(settings, "LLAMA_ARG_EMBEDDINGS") or pooling not in ("", "none"),
        vision=bool(settings.get("LLAMA_ARG_MMPROJ") or settings.get("LLAMA_ARG_MMPROJ_URL")),
        template=template,
        template_file=Path(template_file) if template_file else None,
        ctx_per_request=_per_request(settings),
        slots=_slots(settings),
        # /slots, not /metrics: it is on by default (/metrics needs --metrics).
        busy_path=None if settings.get(SLOTS_ENV, "") in _FALSE else "/slots",
    )


def _slots(settings: dict[str, str]) -> int:
    parallel = _int(settings.get("LLAMA_ARG_N_PARALLEL"))
    return parallel if parallel and parallel > 0 else AUTO_SLOTS


def _true(settings: dict[str, str], key: str) -> bool:
    return settings.get(key, "") in _TRUE


def _per_request(settings: dict[str, str]) -> int | None:
    """ctx_size split over the slots, as llama-server does unless the KV cache is unified
    (which it is when the number of slots is left to it: each request then gets it all)."""
    ctx = _int(settings.get("LLAMA_ARG_CTX_SIZE"))
    if not ctx:
        return None  # 0 or unset: the trained context
    parallel = _int(settings.get("LLAMA_ARG_N_PARALLEL"))
    if not parallel or parallel < 1 or _true(settings, "LLAMA_ARG_KV_UNIFIED"):
        return ctx
    return ctx // parallel


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None
