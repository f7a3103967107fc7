"""The environment a llama.cpp executable is started with, ours included."""

from __future__ import annotations

from collections.abc import Mapping


def child_env(base: Mapping[str, str], *layers: Mapping[str, str]) -> dict[str, str]:
    """`base` minus every inherited LLAMA_* variable, then `layers` on top, in order.

    llama.cpp applies LLAMA_* variables before it reads argv, so a stray one in llamad's
    own environment would change every child, and could make even `--help` fail.
    """
    env = {k: v for k, v in base.items() if not k.startswith("LLAMA_")}
    for layer in layers:
        env.update(layer)
    return env
