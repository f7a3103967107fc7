"""Reading the file's structure, collecting every problem instead of stopping at the first.

pydantic rejects the whole file for one bad value, which would hide every problem behind
it: someone fixing a config would see them one run at a time. So the parts that fail are
set aside (a bad `[daemon]` key falls back to its default, a bad instance is left out),
the rest is validated again, and resolution goes on with what is left; `load` reports
the lines of every layer together.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import ValidationError as PydanticError

from llamad.config.messages import bad_names, pydantic_lines
from llamad.config.schema import ConfigFile, fleet_of, read_text, validate_file

# Each round sets aside at least one part; a file with more broken parts than this is
# reported in full anyway by the next run.
_ROUNDS = 8


def read_partial(path: Path) -> tuple[ConfigFile, str, list[str]]:
    """The model of what is valid in `path`, its text, and one line per structural problem.

    A file that cannot be read or parsed as TOML still raises ConfigError.
    """
    text, data = read_text(path)
    fleet, problems = fleet_of(path, text, data)
    data["fleet"] = fleet  # given, it takes the place of the file's raw table
    try:
        cfg = validate_file(path, {"fleet": fleet})
    except PydanticError as exc:
        problems += pydantic_lines(path, text, exc)
        cfg = _validate_rest(path, text, data, exc, problems)
    names = bad_names(path, text, cfg.instances)
    if names:
        problems += names
        kept = {n: t for n, t in cfg.instances.items() if not bad_names(path, text, [n])}
        cfg = cfg.model_copy(update={"instances": kept})
    return cfg, text, problems


def _validate_rest(
    path: Path, text: str, data: dict[str, Any], exc: PydanticError, problems: list[str]
) -> ConfigFile:
    for _ in range(_ROUNDS):
        for err in exc.errors(include_url=False):
            _set_aside(data, tuple(err["loc"]))
        try:
            return validate_file(None, data)
        except PydanticError as again:
            problems += pydantic_lines(path, text, again)
            exc = again
    return validate_file(None, {"fleet": data["fleet"]})


def _set_aside(data: dict[str, Any], loc: tuple[Any, ...]) -> None:
    # An instance goes as a whole (half an instance would start wrongly); elsewhere the
    # key itself goes and its default applies.
    if not loc or loc[0] == "fleet":
        return  # parsed apart (fleet_of), its problems already reported
    keep = 2 if loc and loc[0] in ("instances", "daemon", "supervise", "defaults", "library") else 1
    parent: Any = data
    for part in loc[: keep - 1]:
        parent = parent.get(part) if isinstance(parent, dict) else None
    if isinstance(parent, dict) and len(loc) >= keep:
        parent.pop(loc[keep - 1], None)
    elif loc:
        data.pop(loc[0], None)
