"""What a saved slot fits (`cache_fit`): the model file llama-server loaded, when llamad
does not name one itself (`hf_repo`, `model_url`: llama-server downloads it)."""

from __future__ import annotations

import os
from pathlib import Path

from llamad.backends.llama_cache import cache_fit
from llamad.backends.spec import InstanceSpec

REPO = (("LLAMA_ARG_HF_REPO", "user/model:Q4_K_M"),)


def _downloaded(settings: tuple[tuple[str, str], ...]) -> InstanceSpec:
    return InstanceSpec(
        name="m", host="127.0.0.1", port=9, model=None, settings=settings, args=(), env=()
    )


def test_a_downloaded_model_replaced_under_its_name_differs(tmp_path: Path) -> None:
    """A new revision of the repo lands in the same file: its cache is another's."""
    file = tmp_path / "user_model_Q4_K_M.gguf"
    file.write_bytes(b"GGUF one")
    props = {"model_path": str(file), "build_info": "b1"}
    before = cache_fit(_downloaded(REPO), props)
    file.write_bytes(b"GGUF revision two")
    os.utime(file, ns=(1, 1))
    after = cache_fit(_downloaded(REPO), props)
    assert before["model"]["path"] == str(file)
    assert before["model"] != after["model"]
