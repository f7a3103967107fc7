"""What the installed mlx_lm.server accepts, parsed from its argparse `--help`.

Like llama-server's catalogue, reading the installed server instead of a hard-coded table
means a newer mlx-lm brings its new flags without a llamad release. mlx_lm.server reads no
environment, so every option becomes a command-line flag.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from llamad.backends.options import Option

# "  --top-p TOP_P   Default ..." or "  -h, --help": argparse indents option rows by two.
_ITEM = r"-[\w-]+(?: (?:\{[^}\s]*\}|[A-Z][A-Z0-9_]*))?"
_ROW_RE = re.compile(rf"^  ({_ITEM}(?:, {_ITEM})*)")
# Flags llamad sets itself (`model`, `host`, `port` keys) or that make no sense supervised.
RESERVED = frozenset({"--model", "--host", "--port", "--help"})


def short_key(flag: str) -> str:
    """The config key for a flag: --max-tokens -> max_tokens."""
    return flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class MlxOptions:
    """The options of one mlx_lm.server build, indexed by short key and by flag."""

    options: tuple[Option, ...]
    version: str  # the mlx-lm package version
    _keys: dict[str, Option] = field(init=False, repr=False, compare=False)
    _flags: dict[str, Option] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        usable = [o for o in self.options if not RESERVED.intersection(o.flags)]
        keys = {short_key(o.flags[-1]): o for o in usable}
        object.__setattr__(self, "_keys", keys)
        object.__setattr__(self, "_flags", {f: o for o in self.options for f in o.flags})

    def lookup(self, key: str) -> Option | None:
        """The option for a short key (`max_tokens`), unless llamad sets it itself."""
        return self._keys.get(key)

    def flag(self, flag: str) -> Option | None:
        """The option with this spelling, e.g. "--temp"."""
        return self._flags.get(flag)

    def suggest(self, key: str, extra: Iterable[str] = ()) -> str | None:
        """The closest short key (or name in `extra`) to a mistyped `key`, if any."""
        norm = short_key(key.strip()).lower()
        if norm in self._keys:  # someone wrote the flag itself
            return norm
        candidates = list(dict.fromkeys([*self._keys, *extra]))
        matches = difflib.get_close_matches(norm, candidates, n=1)
        return matches[0] if matches else None


def parse_help(text: str) -> tuple[Option, ...]:
    """Parse argparse's option rows: flags with an optional METAVAR or {choices}."""
    options: list[Option] = []
    for line in text.splitlines():
        row = _ROW_RE.match(line)
        if row is None:
            continue
        flags: list[str] = []
        value: str | None = None
        for part in row.group(1).split(", "):
            flag, _, hint = part.partition(" ")
            flags.append(flag)
            value = hint or value
        options.append(Option(tuple(flags), None, value, negatable=False))
    return tuple(options)


def render_flag(option: Option, value: object) -> list[str]:
    """argv for one key: a bare flag for `true`, nothing for `false`, else flag and value."""
    flag = option.flags[-1]
    if option.value is None:
        if not isinstance(value, bool):
            raise ValueError("must be true or false")
        return [flag] if value else []
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise ValueError(f"takes a value ({option.value})")
    text = str(value)
    choices = option.value[1:-1].split(",") if option.value.startswith("{") else None
    if choices is not None and text not in choices:
        raise ValueError(f"must be one of {', '.join(choices)}")
    return [flag, text]
