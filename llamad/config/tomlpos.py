"""Find the line of a dotted key in TOML text, so errors can say `file:line`.

tomllib gives no positions for valid documents. This scanner understands the shapes a
hand-written llamad.toml uses (table headers, `key = value`, inline tables on one line,
multi-line strings, whose lines are never taken for keys or headers); when it cannot
place a key it answers None and the error names just the file.
"""

from __future__ import annotations

import re
from pathlib import Path

_HEADER = re.compile(r"^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"^\s*([A-Za-z0-9_\-\"'.\s]+?)\s*=")


def _split_dotted(raw: str) -> tuple[str, ...]:
    parts = re.findall(r'"([^"]*)"|\'([^\']*)\'|([^.\s]+)', raw)
    # An empty quoted key (`[instances.""]`) is a key too: the empty string.
    return tuple(next((p for p in groups if p), "") for groups in parts)


def locate(text: str, keys: tuple[str, ...]) -> int | None:
    """1-based line where `keys` is defined, or the line of its closest enclosing table."""
    best: tuple[int, int] | None = None  # (how many keys matched, line)
    table: tuple[str, ...] = ()
    entries: dict[tuple[str, ...], int] = {}  # `[[x]]` headers seen so far, per x
    inside: str | None = None  # the delimiter of the multi-line string open, if any
    for number, line in enumerate(text.splitlines(), start=1):
        opened, inside = inside, _open_after(line, inside)
        if opened is not None:
            continue  # a chat template's `[INST]` is text, not a table
        header = _HEADER.match(line)
        if header:
            table = _split_dotted(header.group(1))
            if line.lstrip().startswith("[["):
                # The n-th `[[x]]` is entry n of array x, as the validator's path says.
                entries[table] = entries.get(table, -1) + 1
                table += (str(entries[table]),)
            best = _better(best, _prefix(table, keys), number)
            continue
        key = _KEY.match(line)
        if not key:
            continue
        full = table + _split_dotted(key.group(1))
        matched = _prefix(full, keys)
        # An inline table (`supervise = { start_timeout = 1 }`) holds deeper keys on this line.
        if (
            matched == len(full)
            and matched < len(keys)
            and re.search(rf"\b{re.escape(keys[matched])}\s*=", line[key.end() :])
        ):
            matched += 1
        best = _better(best, matched, number)
    return best[1] if best else None


def _open_after(line: str, inside: str | None) -> str | None:
    """The multi-line string delimiter (`\"\"\"` or `'''`) still open at the end of
    `line`, given the one open at its start."""
    i, n = 0, len(line)
    while i < n:
        if inside is not None:
            end = _closing(line, i, inside)
            if end is None:
                return inside
            i, inside = end, None
        elif line.startswith(('"""', "'''"), i):
            inside, i = line[i : i + 3], i + 3
        elif line[i] in "\"'":
            i = _string_end(line, i)
        elif line[i] == "#":
            return None
        else:
            i += 1
    return inside


def _closing(line: str, i: int, delim: str) -> int | None:
    """Just past the end of the multi-line string that continues at `line[i]`, or None."""
    while i < len(line):
        if delim == '"""' and line[i] == "\\":
            i += 2  # an escaped character, a quote included
        elif line.startswith(delim, i):
            i += 3
            # Up to two quotes just before the delimiter belong to the string.
            while i < len(line) and line[i] == delim[0]:
                i += 1
            return i
        else:
            i += 1
    return None


def _string_end(line: str, i: int) -> int:
    """Just past the one-line string that starts at `line[i]`."""
    quote, i = line[i], i + 1
    while i < len(line) and line[i] != quote:
        i += 2 if quote == '"' and line[i] == "\\" else 1
    return i + 1


def _prefix(have: tuple[str, ...], want: tuple[str, ...]) -> int:
    """How many leading keys of `want` this definition covers (0 if it is elsewhere)."""
    n = min(len(have), len(want))
    return n if have[:n] == want[:n] else 0


def _better(best: tuple[int, int] | None, matched: int, line: int) -> tuple[int, int] | None:
    if matched and (best is None or matched > best[0]):
        return (matched, line)
    return best


def where_is(path: Path, text: str, keys: tuple[str | int, ...]) -> str:
    """`file:line` for a dotted key when the line can be found, else just the file."""
    line = locate(text, tuple(str(k) for k in keys))
    return f"{path}:{line}" if line else str(path)
