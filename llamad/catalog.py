"""What the installed llama-server accepts, read from its own `--help`.

Reading the binary instead of hard-coding a table means a newer llama.cpp brings new
options without a llamad release. The parsed result is cached per binary (path, size,
mtime), so only the first start after an upgrade pays for the subprocess.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
import os
import re
import stat
import subprocess
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Re-exported: config code and callers import everything catalogue-related from here
# (bench/ still takes find_binary from here; find_rpc_server is only in llamad.binaries).
from llamad.binaries import CatalogError as CatalogError
from llamad.binaries import find_binary as find_binary
from llamad.render import TomlScalar as TomlScalar
from llamad.render import render as render

SCHEMA = 1  # bump when Option or the parser changes, so stale caches are re-read
TIMEOUT = 10.0
_ENV_RE = re.compile(r"\(env: ([A-Za-z_][A-Za-z0-9_]*)\)")
_SECTION_RE = re.compile(r"^-{3,}\s.*-{3,}\s*$")  # "----- common params -----"
_GAP_RE = re.compile(r"\s{2,}")  # llama.cpp pads the flags column with >= 3 spaces


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


def short_key(env: str) -> str:
    """The config key for an env name: LLAMA_ARG_CTX_SIZE -> ctx_size, LLAMA_API_KEY -> api_key."""
    for prefix in ("LLAMA_ARG_", "LLAMA_"):
        if env.startswith(prefix):
            return env[len(prefix) :].lower()
    return env.lower()


@dataclass(frozen=True)
class Catalog:
    """The options of one llama-server build, indexed by key and by flag."""

    options: tuple[Option, ...]
    version: str  # first line of `--version`
    _keys: dict[str, Lookup] = field(init=False, repr=False, compare=False)
    _flags: dict[str, Option] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        keys: dict[str, Lookup] = {}
        for opt in self.options:
            if opt.env:
                keys.setdefault(opt.env, Lookup(opt, opt.env, False))
                keys.setdefault(short_key(opt.env), Lookup(opt, opt.env, False))
        # Second pass, so a real option (e.g. --no-host, LLAMA_ARG_NO_HOST) always wins over
        # the synthesised no_x spelling. llama.cpp reads a present LLAMA_ARG_NO_X as false
        # whatever its value, so no_x must become LLAMA_ARG_X with the boolean inverted.
        for opt in self.options:
            if opt.env and opt.negatable and opt.env.startswith("LLAMA_ARG_"):
                neg = "LLAMA_ARG_NO_" + opt.env.removeprefix("LLAMA_ARG_")
                keys.setdefault(neg, Lookup(opt, opt.env, True))
                keys.setdefault(short_key(neg), Lookup(opt, opt.env, True))
        object.__setattr__(self, "_keys", keys)
        object.__setattr__(self, "_flags", {f: o for o in self.options for f in o.flags})

    def lookup(self, key: str) -> Lookup | None:
        """Resolve an env name (`LLAMA_ARG_CTX_SIZE`) or short key (`ctx_size`, `no_mmap`)."""
        return self._keys.get(key)

    def flag(self, flag: str) -> Option | None:
        """The option with this spelling, e.g. "-c" or "--ctx-size"."""
        return self._flags.get(flag)

    def short_keys(self) -> list[str]:
        """Sorted short keys of the options settable through the environment."""
        return sorted({short_key(o.env) for o in self.options if o.env})

    def suggest(self, key: str, extra: Iterable[str] = ()) -> str | None:
        """The closest valid short key (or name in `extra`) to a mistyped `key`, if any."""
        opt = self._flags.get(key)
        if opt is not None and opt.env:  # someone wrote the flag: name its key
            return short_key(opt.env)
        norm = key.strip().lstrip("-").replace("-", "_")
        norm = short_key(norm.upper()) if norm.upper().startswith("LLAMA_") else norm.lower()
        candidates = [k for k in self._keys if k.islower()] + list(extra)
        matches = difflib.get_close_matches(norm, list(dict.fromkeys(candidates)), n=1)
        return matches[0] if matches else None


def parse_help(text: str) -> tuple[Option, ...]:
    """Parse `llama-server --help`: rows start at column 0 with "-", details are indented."""
    options: list[Option] = []
    head: str | None = None
    body: list[str] = []

    def flush() -> None:
        if head is not None:
            options.append(_parse_row(head, body))

    for line in text.splitlines():
        if line.startswith("-") and not _SECTION_RE.match(line):
            flush()
            head, body = line, []
        elif line[:1].isspace() or not line:
            body.append(line)
        else:  # a section header or stray log line ends the current option
            flush()
            head, body = None, []
    flush()
    return tuple(options)


def _parse_row(head: str, body: list[str]) -> Option:
    # Normalise the padding after commas ("-c,    --ctx-size N") so that a run of spaces
    # only remains where the description column starts.
    spec = _GAP_RE.split(re.sub(r",\s+", ", ", head.strip()), maxsplit=1)[0]
    # Split on ", " only: hints such as "MiB0,MiB1,..." contain bare commas.
    parts = spec.split(", ")
    flags: list[str] = []
    value: str | None = None
    for i, part in enumerate(parts):
        flag, _, rest = part.partition(" ")
        flags.append(flag)
        if rest:  # the hint follows the last spelling and may itself contain ", "
            value = ", ".join([rest, *parts[i + 1 :]]).strip()
            break
    envs = _ENV_RE.findall("\n".join([head, *body]))
    negatable = any(f.startswith("--no-") and "--" + f[5:] in flags for f in flags)
    return Option(tuple(flags), envs[-1] if envs else None, value, negatable)


def load_catalog(binary: Path, cache_dir: Path) -> Catalog:
    """The catalogue of `binary`, from the cache when the binary is unchanged."""
    path = Path(os.path.abspath(binary.expanduser()))
    key = _cache_key(path)
    digest = hashlib.sha1(str(path).encode(), usedforsecurity=False).hexdigest()[:16]
    cache = cache_dir / f"catalog-{digest}.json"
    cached = _read_cache(cache, key)
    if cached is not None:
        return cached
    helped = _run(path, "--help")
    if helped.returncode != 0:
        detail = (helped.stderr.strip().splitlines() or [f"exit {helped.returncode}"])[-1]
        raise CatalogError(f"{path} --help failed: {detail[:200]}")
    options = parse_help(helped.stdout if helped.stdout.strip() else helped.stderr)
    if not any(o.env for o in options):
        raise CatalogError(f"{path} --help lists no options with an env name: not llama-server?")
    catalog = Catalog(options, _version(path))
    # A binary replaced while we ran it must not get its new key paired with old output.
    if _cache_key(path) == key:
        _write_cache(cache, key, catalog)
    return catalog


def _cache_key(path: Path) -> list[Any]:
    try:
        st = path.stat()
    except OSError as exc:
        raise CatalogError(f"llama-server not found: {path}") from exc
    if not stat.S_ISREG(st.st_mode) or not os.access(path, os.X_OK):
        raise CatalogError(f"llama-server is not an executable file: {path}")
    # The resolved target catches a symlink re-pointed by a package upgrade (Homebrew).
    target = str(path.resolve())
    return [SCHEMA, str(path), target, st.st_size, st.st_mtime_ns]


def _run(path: Path, arg: str) -> subprocess.CompletedProcess[str]:
    # llama.cpp applies LLAMA_* env vars before it looks at argv, so a stray one in our own
    # environment could make even --help fail.
    env = {k: v for k, v in os.environ.items() if not k.startswith("LLAMA_")}
    try:
        return subprocess.run(
            [str(path), arg],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=TIMEOUT,
            env=env,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise CatalogError(f"{path} {arg} timed out after {TIMEOUT:g} s") from exc
    except OSError as exc:
        raise CatalogError(f"cannot run {path}: {exc.strerror or exc}") from exc


def _version(path: Path) -> str:
    try:
        done = _run(path, "--version")
    except CatalogError:
        return "unknown"  # the options matter; a missing version only hides a label
    lines = [ln.strip() for ln in (done.stderr + "\n" + done.stdout).splitlines() if ln.strip()]
    return next((ln for ln in lines if ln.startswith("version:")), lines[0] if lines else "unknown")


def _read_cache(cache: Path, key: list[Any]) -> Catalog | None:
    try:
        data = json.loads(cache.read_text(encoding="utf-8"))
        if data["key"] != key:
            return None
        options = tuple(_row(*row) for row in data["options"])
        if not isinstance(data["version"], str):
            return None
        return Catalog(options, data["version"])
    except (OSError, ValueError, TypeError, KeyError):
        return None  # missing, corrupt or foreign: read the binary again


def _row(flags: Any, env: Any, value: Any, negatable: Any) -> Option:
    # Only a hand-edited file could parse yet hold wrong types; a TypeError means re-read.
    texts = [*flags, *(t for t in (env, value) if t is not None)]
    ok = isinstance(flags, list) and isinstance(negatable, bool)
    if not ok or not all(isinstance(t, str) for t in texts):
        raise TypeError("malformed cache row")
    return Option(tuple(flags), env, value, negatable)


def _write_cache(cache: Path, key: list[Any], catalog: Catalog) -> None:
    rows = [[o.flags, o.env, o.value, o.negatable] for o in catalog.options]
    data = {"key": key, "version": catalog.version, "options": rows}
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
