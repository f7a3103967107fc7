"""One option row of a server's `--help`, and a config key resolved to it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Option:
    """One option row of `llama-server --help`."""

    flags: tuple[str, ...]  # every spelling, e.g. ("-c", "--ctx-size")
    env: str | None  # e.g. "LLAMA_ARG_CTX_SIZE"; None when only the command line works
    value: str | None  # value hint as printed ("N", "[on|off|auto]"); None for a bare flag
    negatable: bool  # a --x/--no-x pair


@dataclass(frozen=True)
class Lookup:
    """A config key resolved to the env var to set."""

    option: Option
    env: str
    invert: bool  # the key was the `no_x` spelling of a negatable pair
