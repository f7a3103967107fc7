"""Model names as people type them: an exact name or alias first, then the one instance
whose name or alias differs only in case (`user/repo:Q4_k_m`); two that differ only in
case are never guessed between."""

from __future__ import annotations

import dataclasses

import pytest
from supervisor_double import Double, spec

from llamad.gateway.models.router import Router

pytestmark = pytest.mark.timeout(10)


def _router() -> Router:
    double = Double()
    hf = dataclasses.replace(
        spec("someone/Tiny-GGUF:Q4_K_M"), aliases=("hf.co/someone/Tiny-GGUF:Q4_K_M",)
    )
    for s in (hf, spec("Chat"), spec("chat"), spec("Solo")):
        double.add(s)
    return Router(double)


@pytest.mark.parametrize(
    ("asked", "found"),
    [
        ("someone/Tiny-GGUF:Q4_K_M", "someone/Tiny-GGUF:Q4_K_M"),
        ("someone/Tiny-GGUF:Q4_k_m", "someone/Tiny-GGUF:Q4_K_M"),
        ("hf.co/someone/tiny-gguf:q4_k_m", "someone/Tiny-GGUF:Q4_K_M"),
        ("HF.CO/someone/Tiny-GGUF:Q4_K_m", "someone/Tiny-GGUF:Q4_K_M"),
        ("solo", "Solo"),
        ("Chat", "Chat"),  # exact names win over folding
        ("chat", "chat"),
        ("CHAT", None),  # two instances fold to it: neither is guessed
        ("someone/Tiny-GGUF:Q8_0", None),
    ],
)
def test_names_fold_case_only_when_one_instance_answers(asked: str, found: str | None) -> None:
    facts = _router().find(asked)
    assert (facts.name if facts else None) == found
