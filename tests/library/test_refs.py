"""Pull references: every spelling of one model shares a key (the `hf.co/` prefix or not,
the quant in any case, no quant meaning Q4_K_M), so a second pull follows the first and a
request by any of them sees the download."""

from __future__ import annotations

import pytest

from llamad.library.refs import HfRef, OllamaRef, RefError, parse

pytestmark = pytest.mark.timeout(10)

SAME_HF = [
    "hf.co/someone/Tiny-GGUF",
    "hf.co/someone/Tiny-GGUF:latest",
    "someone/Tiny-GGUF:Q4_K_M",
    "someone/Tiny-GGUF:Q4_k_m",
    "hf.co/someone/tiny-gguf:q4_k_m",
    "huggingface.co/someone/Tiny-GGUF:Q4_K_M",
    "hf.co/someone/Tiny-GGUF/sub/tiny-Q4_K_M.gguf",
]


@pytest.mark.parametrize("ref", SAME_HF)
def test_every_spelling_of_one_hf_model_shares_its_key(ref: str) -> None:
    assert parse(ref).key == "hf:someone/tiny-gguf:q4_k_m"


def test_other_quants_repos_and_registries_do_not() -> None:
    keys = {parse(r).key for r in SAME_HF}
    for other in ("someone/Tiny-GGUF:Q8_0", "someone/Other-GGUF", "tinyllama", "tiny-gguf"):
        assert parse(other).key not in keys


def test_forms_and_names() -> None:
    assert parse("hf.co/u/r:Q4_k_m") == HfRef("u/r", "Q4_k_m")
    assert parse("hf.co/u/r").name == "u/r"  # the repo's own name, as the scan gives it
    assert parse("hf.co/u/r/x-q8_0.gguf") == HfRef("u/r", None, "x-q8_0.gguf")
    assert parse("llama3.2") == OllamaRef("library", "llama3.2", "latest")
    assert parse("Qwen2.5:7B").key == parse("qwen2.5:7b").key
    assert parse("llama3.2:latest").key == parse("llama3.2").key
    with pytest.raises(RefError, match="give an Ollama name"):
        parse("no//good")
