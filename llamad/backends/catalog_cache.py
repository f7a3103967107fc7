"""Reading the installed binary's catalogue: `--help` and `--version`, cached per binary.

`cached` keeps what any backend learns from its executable. The cache is keyed by the
binary's path, resolved target, size and mtime, so only the first start after an upgrade
pays for the subprocess. `llama serve`'s catalogue is kept apart from what `llama` itself
says (`catalog-serve-...`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import signal
import stat
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from llamad.backends.binaries import CatalogError
from llamad.backends.catalog import Catalog, parse_help
from llamad.backends.options import Option
from llamad.backends.quarantine import GATEKEEPER, Quarantine
from llamad.backends.tool import ServerCommand
from llamad.common.childenv import child_env

SCHEMA = 1  # bump when Option or the parser changes, so stale caches are re-read
TIMEOUT = 10.0
T = TypeVar("T")


def load_catalog(command: ServerCommand, cache_dir: Path) -> Catalog:
    """The catalogue of `command`, from the cache when the binary is unchanged."""
    prefix = "-".join(["catalog", *command.prefix])

    def read(path: Path) -> Catalog:
        return _read_catalog(ServerCommand(path, command.prefix))

    return cached(command.path, cache_dir, prefix, read, _encode, _decode)


def cached(
    binary: Path,
    cache_dir: Path,
    prefix: str,
    read: Callable[[Path], T],
    encode: Callable[[T], dict[str, Any]],
    decode: Callable[[dict[str, Any]], T],
) -> T:
    """What `read(binary)` says, kept in `cache_dir/PREFIX-HASH.json` until the binary
    changes. `decode` raises ValueError, TypeError or KeyError on a stale or foreign file."""
    path = Path(os.path.abspath(binary.expanduser()))
    key = _cache_key(path)
    digest = hashlib.sha1(str(path).encode(), usedforsecurity=False).hexdigest()[:16]
    cache = cache_dir / f"{prefix}-{digest}.json"
    data = _read_cache(cache, key)
    if data is not None:
        try:
            return decode(data)
        except (ValueError, TypeError, KeyError):
            pass  # malformed: read the binary again
    value = read(path)
    # A binary replaced while we ran it must not get its new key paired with old output.
    if _cache_key(path) == key:
        _write_cache(cache, key, encode(value))
    return value


def _read_catalog(command: ServerCommand) -> Catalog:
    helped = run_flag(command, "--help")
    if helped.returncode != 0:
        detail = (helped.stderr.strip().splitlines() or [f"exit {helped.returncode}"])[-1]
        raise CatalogError(f"{command} --help failed: {detail[:200]}")
    options = parse_help(helped.stdout if helped.stdout.strip() else helped.stderr)
    if not any(o.env for o in options):
        raise CatalogError(f"{command} --help lists no options with an env name: not llama-server?")
    return Catalog(options, version_of(command))


def _cache_key(path: Path) -> list[Any]:
    try:
        st = path.stat()
    except OSError as exc:
        raise CatalogError(f"{path.name} not found: {path}") from exc
    if not stat.S_ISREG(st.st_mode) or not os.access(path, os.X_OK):
        raise CatalogError(f"{path.name} is not an executable file: {path}")
    # The resolved target catches a symlink re-pointed by a package upgrade (Homebrew).
    target = str(path.resolve())
    return [SCHEMA, str(path), target, st.st_size, st.st_mtime_ns]


def run_flag(
    command: ServerCommand,
    arg: str,
    timeout: float = TIMEOUT,
    quarantine: Quarantine = GATEKEEPER,
) -> subprocess.CompletedProcess[str]:
    """`command arg` (`--help`, `--version`) with a timeout, outside our LLAMA_* environment.
    A run macOS refused for a quarantined download raises with the fix."""
    env = child_env(os.environ)
    try:
        done = subprocess.run(
            command.argv(arg),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise CatalogError(f"{command} {arg} timed out after {timeout:g} s") from exc
    except OSError as exc:
        why = quarantine.refused_exec(command.path, exc)
        raise CatalogError(why or f"cannot run {command}: {exc.strerror or exc}") from exc
    output = [*done.stdout.splitlines(), *done.stderr.splitlines()]
    killed_by = signal.Signals(-done.returncode).name if done.returncode < 0 else None
    if why := quarantine.refused_run(command.path, killed_by, output):
        raise CatalogError(why)
    return done


def version_of(command: ServerCommand) -> str:
    """The `version: ...` line of `command --version` (`llama serve --version` prints
    llama-server's), or "unknown"."""
    try:
        done = run_flag(command, "--version")
    except CatalogError:
        return "unknown"  # the options matter; a missing version only hides a label
    lines = [ln.strip() for ln in (done.stderr + "\n" + done.stdout).splitlines() if ln.strip()]
    return next((ln for ln in lines if ln.startswith("version:")), lines[0] if lines else "unknown")


def _read_cache(cache: Path, key: list[Any]) -> dict[str, Any] | None:
    try:
        data = json.loads(cache.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None  # missing or corrupt: read the binary again
    if not isinstance(data, dict) or data.get("key") != key:
        return None
    return data


def _decode(data: dict[str, Any]) -> Catalog:
    if not isinstance(data["version"], str):
        raise TypeError("malformed cache version")
    return Catalog(tuple(_row(*row) for row in data["options"]), data["version"])


def _encode(catalog: Catalog) -> dict[str, Any]:
    rows = [[o.flags, o.env, o.value, o.negatable] for o in catalog.options]
    return {"version": catalog.version, "options": rows}


def _row(flags: Any, env: Any, value: Any, negatable: Any) -> Option:
    # Only a hand-edited file could parse yet hold wrong types; a TypeError means re-read.
    texts = [*flags, *(t for t in (env, value) if t is not None)]
    ok = isinstance(flags, list) and isinstance(negatable, bool)
    if not ok or not all(isinstance(t, str) for t in texts):
        raise TypeError("malformed cache row")
    return Option(tuple(flags), env, value, negatable)


def _write_cache(cache: Path, key: list[Any], value: dict[str, Any]) -> None:
    data = {**value, "key": key}
    try:
        cache.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=cache.parent, prefix=cache.name, suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(data, out)
            os.replace(tmp, cache)  # readers see the old file or the new one, never half
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
    except OSError:
        pass  # an unwritable cache only costs one --help run per start
