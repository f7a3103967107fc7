"""common.childenv: one rule for what a llama.cpp child inherits."""

from __future__ import annotations

from llamad.common.childenv import child_env


def test_inherited_llama_variables_are_dropped_then_layers_apply() -> None:
    base = {"PATH": "/bin", "LLAMA_ARG_CTX_SIZE": "1", "LLAMA_API_KEY": "x", "LLAMAD_X": "y"}
    env = child_env(base, {"LLAMA_ARG_PORT": "8080"}, {"A": "1", "LLAMA_ARG_PORT": "9090"})
    assert env == {"PATH": "/bin", "LLAMAD_X": "y", "LLAMA_ARG_PORT": "9090", "A": "1"}
    assert base["LLAMA_API_KEY"] == "x"  # the caller's mapping is left alone
