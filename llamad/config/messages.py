"""The config's structural errors as one-liners: `file:line: key: what is wrong (got X)`,
with a did-you-mean for an unknown key and secrets never shown."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from pydantic import ValidationError as PydanticError
from pydantic_core import ErrorDetails

from llamad.common.redact import any_secret, scrub, shown
from llamad.config.fleet_tables import RemoteSettings
from llamad.config.gateway_table import GatewaySettings
from llamad.config.library_table import LibrarySettings
from llamad.config.schema import ConfigFile, DaemonSettings, SuperviseSettings
from llamad.config.tomlpos import where_is

_INSTANCE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


def bad_names(path: Path, text: str, names: Iterable[str]) -> list[str]:
    """One line per instance name that is not letters, digits, '.', '_' or '-'."""
    return [
        f"{where_is(path, text, ('instances', n))}: instance name {n!r} must be letters, "
        "digits, '.', '_' or '-' (1 to 64)"
        for n in names
        if not _INSTANCE_NAME.match(n)
    ]


def pydantic_lines(path: Path, text: str, exc: PydanticError) -> list[str]:
    """One line per pydantic error, at the key's line when it can be found."""
    lines = []
    for err in exc.errors(include_url=False):
        loc = tuple(err["loc"])
        dotted = ".".join(str(p) for p in loc)
        if err["type"] == "extra_forbidden":
            msg = f"unknown key {str(loc[-1])!r}"
            hint = _suggest(loc)
            if hint:
                msg += f" (did you mean {hint}?)"
            dotted = ".".join(str(p) for p in loc[:-1]) or "top level"
        elif err["type"] == "missing":
            msg = "is required"
        else:
            msg = describe(err)
        lines.append(f"{where_is(path, text, loc)}: {dotted}: {msg}")
    return lines


def describe(err: ErrorDetails, where: tuple[object, ...] = ()) -> str:
    """A pydantic error as the tail of one of our lines: 'must be ... (got X)'.

    `where` is the path of keys above `err["loc"]`; under a secret key the value is not shown.
    """
    keys = (*where, *err["loc"])
    if err["type"] == "value_error" and "error" in err.get("ctx", {}):
        # Our validators' messages already say what was got.
        msg = str(err["ctx"]["error"])
        return scrub(msg, err.get("input")) if any_secret(keys) else msg
    msg = err["msg"]
    return f"{msg[:1].lower()}{msg[1:]} (got {shown(keys, err.get('input'))})"


def _suggest(loc: tuple[Any, ...]) -> str | None:
    import difflib

    # The table holding the unknown key: its path with list indices dropped.
    section = ".".join(str(p) for p in loc[:-1] if not isinstance(p, int)) or None
    fields = {
        "daemon": DaemonSettings.model_fields,
        "daemon.remote": RemoteSettings.model_fields,
        "supervise": SuperviseSettings.model_fields,
        "gateway": GatewaySettings.model_fields,
        "library": LibrarySettings.model_fields,
        None: ConfigFile.model_fields,
    }.get(section, {})
    match = difflib.get_close_matches(str(loc[-1]), list(fields), n=1)
    return match[0] if match else None
