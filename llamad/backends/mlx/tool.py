"""Finding mlx_lm.server and reading what it is: its options and the mlx-lm version.

Both are cached per executable through the same mechanism as llama-server's catalogue, so
only the first start after an upgrade pays the seconds mlx_lm.server needs to import MLX
just to print `--help`.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from llamad.backends.binaries import CatalogError, find_executable
from llamad.backends.catalog_cache import TIMEOUT, cached, run_flag
from llamad.backends.mlx.options import MlxOptions, parse_help
from llamad.backends.options import Option
from llamad.backends.tool import ServerCommand

NAME = "mlx_lm.server"
# mlx_lm.server imports MLX before it parses argv: its --help is slow on a loaded machine.
HELP_TIMEOUT = 60.0
# Asks the server's own interpreter for the package version without importing MLX.
_VERSION_CODE = "import importlib.metadata as m; print(m.version('mlx-lm'))"


def find_server(configured: str | None) -> Path:
    """`[daemon] mlx_server`, else PATH, else beside the Python running llamad (its venv)."""
    missing = f"{NAME} not found: set [daemon] mlx_server, or `pip install 'llamad[mlx]'`"
    if configured is None and shutil.which(NAME) is None:
        beside = Path(sys.executable).parent / NAME
        if beside.is_file():
            return beside
    return find_executable(NAME, configured, missing)


def load_options(path: Path, cache_dir: Path) -> MlxOptions:
    """The options and version of the mlx_lm.server at `path`, cached per executable."""
    return cached(path, cache_dir, "mlx-options", _read, _encode, _decode)


def _read(path: Path) -> MlxOptions:
    helped = run_flag(ServerCommand(path), "--help", HELP_TIMEOUT)
    options = parse_help(helped.stdout)
    if helped.returncode != 0 or not any("--model" in o.flags for o in options):
        tail = (helped.stderr.strip().splitlines() or [f"exit {helped.returncode}"])[-1]
        raise CatalogError(f"{path} --help does not look like {NAME}: {tail[:200]}")
    return MlxOptions(options, package_version(path))


def package_version(path: Path) -> str:
    """The mlx-lm version installed beside the script at `path` (from its `#!` line)."""
    try:
        with path.open("rb") as script:
            first = script.readline(512).decode("utf-8", "replace")
    except OSError:
        return "unknown"
    words = first[2:].split() if first.startswith("#!") else []
    if words[:1] and Path(words[0]).name == "env":
        words = words[1:]  # `#!/usr/bin/env python3`
    if not words:
        return "unknown"  # not a pip entry script; the options still work
    python = words[0]
    try:
        done = subprocess.run(
            [python, "-c", _VERSION_CODE],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=TIMEOUT,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return "unknown"
    version = done.stdout.strip() if done.returncode == 0 else ""
    return version or "unknown"


def _encode(options: MlxOptions) -> dict[str, Any]:
    return {"version": options.version, "options": [[o.flags, o.value] for o in options.options]}


def _decode(data: dict[str, Any]) -> MlxOptions:
    rows = []
    for flags, value in data["options"]:
        if not all(isinstance(t, str) for t in [*flags, *([value] if value else [])]):
            raise TypeError("malformed cache row")
        rows.append(Option(tuple(flags), None, value, negatable=False))
    if not isinstance(data["version"], str):
        raise TypeError("malformed cache version")
    return MlxOptions(tuple(rows), data["version"])
