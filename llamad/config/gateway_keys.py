"""`[gateway.keys.NAME]`: named gateway keys, each in its own file, optionally limited
to some models. Activity, metrics and `llamactl top` show a key by its name only.

The single `api_key_file` keeps working: its key is named `default` and may use every
model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from llamad.common.paths import anchored
from llamad.common.tokenfile import MIN_TOKEN_CHARS, TokenFileError, read_token

DEFAULT_NAME = "default"

Problem = Callable[[tuple[str, ...], str], None]


class KeySettings(BaseModel):
    """One `[gateway.keys.NAME]` table as written."""

    model_config = ConfigDict(extra="forbid")

    key_file: str
    models: list[str] | None = None  # model names or aliases; None: every model


@dataclass(frozen=True)
class NamedKey:
    """A gateway key and what it may use; the secret stays out of repr()."""

    name: str
    secret: str = field(repr=False)
    models: frozenset[str] | None = None  # instance names (aliases resolved); None: all


def resolve_keys(
    single: str | None,
    tables: Mapping[str, KeySettings],
    owner: Mapping[str, frozenset[str]],
    problem: Problem,
    base: Path,
) -> tuple[NamedKey, ...]:
    """Every key: `api_key_file`'s as `default`, then the named ones. `owner` maps each
    model name and alias to its instances (several for replicas); relative key files are
    taken from `base`, the config file's directory."""
    keys: list[NamedKey] = []
    if single:
        secret = _read(anchored(single, base), ("gateway", "api_key_file"), problem)
        if secret is not None:
            keys.append(NamedKey(DEFAULT_NAME, secret))
        if DEFAULT_NAME in tables:
            problem(
                ("gateway", "keys", DEFAULT_NAME),
                f"{DEFAULT_NAME!r} is api_key_file's key; give this key another name",
            )
    for name, table in tables.items():
        where = ("gateway", "keys", name)
        secret = _read(anchored(table.key_file, base), (*where, "key_file"), problem)
        models = None if table.models is None else _models(table.models, owner, where, problem)
        if secret is None:
            continue
        twin = next((k.name for k in keys if k.secret == secret), None)
        if twin is not None:
            problem((*where, "key_file"), f"{table.key_file} holds the same key as {twin!r}")
            continue
        keys.append(NamedKey(name, secret, models))
    return tuple(keys)


def _read(path: Path, where: tuple[str, ...], problem: Problem) -> str | None:
    try:
        # As the remote control API's tokens: a short key falls to guessing.
        return read_token(path, MIN_TOKEN_CHARS)
    except TokenFileError as exc:
        problem(where, str(exc))
        return None


def _models(
    names: Iterable[str],
    owner: Mapping[str, frozenset[str]],
    where: tuple[str, ...],
    problem: Problem,
) -> frozenset[str]:
    out: set[str] = set()
    for name in names:
        if name in owner:
            out.update(owner[name])
        else:
            known = ", ".join(sorted(owner)) or "none"
            problem((*where, "models"), f"no model named {name!r}; models: {known}")
    return frozenset(out)
