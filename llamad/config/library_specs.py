"""The library's models as on-demand instances, beside the configured ones.

Configured `[instances]` always win: a model whose name (or an alias) is taken, or whose
file a configured instance already serves, is skipped with a note. A configured instance
may name a library model as its `model`. A model that cannot be served (its file, or its
settings) is listed with the reason and never becomes an instance; nothing about one
model can make the config invalid.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from llamad.backends.catalog import Catalog, render
from llamad.backends.llama_server import KIND as LLAMA_SERVER
from llamad.backends.spec import InstanceSpec
from llamad.backends.tool import Tool
from llamad.common.paths import anchored
from llamad.config.library_table import LibrarySettings
from llamad.config.resolve import Resolver
from llamad.config.schema import ConfigFile, InstanceTable
from llamad.library.listing import Library
from llamad.library.model import Found, LibraryModel
from llamad.library.ports import assign, parse_range
from llamad.library.pulled import pulled_files
from llamad.library.scan import Place, default_places, scan

# Ollama's and LM Studio's default context: a model's trained context (128k and more)
# would reserve gigabytes of KV cache for a chat.
DEFAULT_CTX = 4096
# Keys every library model sets itself.
_OWN = {"LLAMA_ARG_MODEL", "LLAMA_ARG_PORT", "LLAMA_ARG_MMPROJ", "LLAMA_ARG_HF_REPO"}

Report = Callable[[tuple[str, ...], str], None]


def find(settings: LibrarySettings, base: Path) -> tuple[Library, Found]:
    """Scan the library's folders (no instances yet)."""
    places = (
        [Place(anchored(d, base)) for d in settings.dirs]
        if settings.dirs is not None
        else default_places()
    )
    pull_dir = anchored(settings.pull_dir, base)
    found = scan(places, pull_dir, pulled_files(pull_dir))
    lib = Library(tuple(p.path for p in places), pull_dir, settings.ollama_registry)
    return lib, found


def check_defaults(catalog: Catalog, values: Mapping[str, Any], report: Report) -> None:
    """`[library.defaults]`: llama-server keys, minus those each model sets itself."""
    for key, value in values.items():
        look = catalog.lookup(key)
        if look is None:
            hint = catalog.suggest(key)
            report((key,), f"unknown key {key!r}" + (f" (did you mean {hint}?)" if hint else ""))
        elif look.env in _OWN:
            report((key,), "is set for each library model by llamad")
        else:
            try:
                render(look, value)
            except ValueError as exc:
                report((key,), f"{exc} (got {value!r})")


def library_specs(
    cfg: ConfigFile,
    path: Path,
    text: str,
    tools: dict[str, Tool],
    configured: dict[str, InstanceSpec],
    taken: set[int],
    settings: LibrarySettings,
    scanned: tuple[Library, Found],
    linked: dict[str, str],
    previous: Library | None,
) -> tuple[dict[str, InstanceSpec], Library]:
    """One on-demand instance per servable library model, and the library to show."""
    lib, found = scanned
    notes = list(found.warnings)
    served = dict(linked)
    owner = {n: s.name for s in configured.values() for n in (s.name, *s.aliases)}
    by_file = {s.model: s.name for s in configured.values() if s.model is not None}
    wanted: list[LibraryModel] = []
    for m in found.models:
        clash = next((n for n in (m.name, *m.aliases) if n in owner), None)
        if m.name in served or m.problem:
            continue
        if m.path in by_file:
            served[m.name] = by_file[m.path]
        elif clash is not None:
            notes.append(f"{m.name}: name {clash!r} is taken by instances.{owner[clash]}; skipped")
        else:
            wanted.append(m)
    ports, full = assign(
        [m.name for m in wanted],
        taken,
        previous.ports if previous else {},
        parse_range(settings.ports),
    )
    specs: dict[str, InstanceSpec] = {}
    problems: dict[str, str] = {n: f"no free port left in {settings.ports}" for n in full}
    base = _base_keys(tools, cfg, settings)
    for m in wanted:
        if m.name in ports:
            spec, problem = _resolve(cfg, path, text, tools, m, ports[m.name], settings, base)
            if spec is not None:
                specs[m.name], served[m.name] = spec, m.name
            else:
                problems[m.name] = problem
    models = tuple(
        dataclasses.replace(m, problem=problems[m.name]) if m.name in problems else m
        for m in found.models
    )
    kept = {n: p for n, p in ports.items() if n in specs}
    return specs, dataclasses.replace(
        lib, models=models, served=served, ports=kept, notes=tuple(notes)
    )


def _base_keys(
    tools: dict[str, Tool], cfg: ConfigFile, settings: LibrarySettings
) -> dict[str, Any]:
    catalog: Catalog = tools[LLAMA_SERVER].details
    given = {*cfg.defaults, *settings.defaults}
    if any((look := catalog.lookup(k)) and look.env == "LLAMA_ARG_CTX_SIZE" for k in given):
        return {}
    return {"ctx_size": DEFAULT_CTX}


def _resolve(
    cfg: ConfigFile,
    path: Path,
    text: str,
    tools: dict[str, Tool],
    m: LibraryModel,
    port: int,
    settings: LibrarySettings,
    base: dict[str, Any],
) -> tuple[InstanceSpec | None, str]:
    catalog: Catalog = tools[LLAMA_SERVER].details
    own, args = _store_settings(catalog, m.settings)
    keys: dict[str, Any] = {**base, **own, **settings.defaults}
    keys |= {"model": str(m.path), "port": port}
    if m.mmproj is not None:
        keys["mmproj"] = str(m.mmproj)
    table = InstanceTable.model_validate(
        {
            **keys,
            "args": args,
            "on_demand": True,
            "idle_timeout": settings.idle_timeout,
            "aliases": list(m.aliases),
        }
    )
    stores = {m.name: m.prompt} if m.prompt is not None else {}
    one = cfg.model_copy(update={"instances": {m.name: table}})
    resolver = Resolver(one, path, text, stores)
    spec = resolver.all(tools).get(m.name)
    prefix = f"instances.{m.name}."
    lines = [ln.split(prefix, 1)[-1] for ln in resolver.problems]
    return spec, "; ".join(lines) or "cannot be resolved"


def _store_settings(
    catalog: Catalog, values: Mapping[str, Any]
) -> tuple[dict[str, Any], list[str]]:
    """A store's settings (Ollama's params) as keys where llama-server reads them from
    the environment, as flags where it has only a flag (`--temp`), dropped otherwise."""
    keys: dict[str, Any] = {}
    args: list[str] = []
    for key, value in values.items():
        if catalog.lookup(key) is not None:
            keys[key] = value
        elif catalog.flag(flag := "--" + key.replace("_", "-")) is not None:
            args += [flag, str(value)]
    return keys, args
