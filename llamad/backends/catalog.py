"""What the installed llama-server accepts, parsed from its own `--help`.

Reading the binary instead of hard-coding a table means a newer llama.cpp brings new
options without a llamad release (`catalog_cache.py` runs it and caches the result).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

# Re-exported: config code imports catalogue errors and rendering from here.
from llamad.backends.binaries import CatalogError as CatalogError
from llamad.backends.options import Lookup, Option
from llamad.backends.render import TomlScalar as TomlScalar
from llamad.backends.render import render as render

_ENV_RE = re.compile(r"\(env: ([A-Za-z_][A-Za-z0-9_]*)\)")
_SECTION_RE = re.compile(r"^-{3,}\s.*-{3,}\s*$")  # "----- common params -----"
_GAP_RE = re.compile(r"\s{2,}")  # llama.cpp pads the flags column with >= 3 spaces


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
