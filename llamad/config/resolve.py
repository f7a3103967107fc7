"""What to launch for each `[instances.NAME]`: llamad's own keys here, the rest by the
instance's backend, frozen into an `InstanceSpec`."""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError as PydanticError

from llamad.backends.base import Backend, Problem, ResolveContext
from llamad.backends.binaries import CatalogError
from llamad.backends.prompt import PromptDefaults, merged
from llamad.backends.registry import BACKENDS, DEFAULT_KIND
from llamad.backends.spec import InstanceSpec
from llamad.backends.tool import Tool
from llamad.common.hosts import same_address
from llamad.common.paths import anchored
from llamad.config.gateway_table import body_size, byte_size
from llamad.config.messages import describe
from llamad.config.prompt_cache import instance_cache
from llamad.config.schema import ConfigFile, InstanceTable, SuperviseSettings
from llamad.config.tomlpos import where_is
from llamad.lifecycle.states import Knobs

# Finds the executable a value names (None: the backend's default) and reads what it is;
# raises CatalogError with one line.
Locate = Callable[[Backend, str | None], Tool]


class Resolver:
    """Resolves every instance of one config file, collecting problems as lines."""

    def __init__(
        self,
        cfg: ConfigFile,
        path: Path,
        text: str,
        stores: Mapping[str, PromptDefaults] | None = None,
        locate: Locate | None = None,
    ) -> None:
        self.cfg, self.path, self.text = cfg, path, text
        self.locate = locate
        # Instance name -> its store's request defaults (a library model's, or the one
        # a configured instance names), under the table's own `system` and `stop`.
        self.stores: Mapping[str, PromptDefaults] = stores or {}
        self.problems: list[str] = []

    def problem_at(self, *prefix: str) -> Problem:
        """A reporter for keys under `prefix`, e.g. ('instances', 'qwen')."""

        def report(keys: tuple[str, ...], msg: str) -> None:
            where = where_is(self.path, self.text, (*prefix, *keys))
            self.problems.append(f"{where}: {'.'.join((*prefix, *keys))}: {msg}")

        return report

    def tools(
        self, also: frozenset[str] = frozenset(), optional: frozenset[str] = frozenset()
    ) -> dict[str, Tool]:
        """The `[daemon]` executable of every kind the file uses (and the kinds in `also`:
        the library's), and only those: a config of rpc-workers alone needs no
        llama-server, nor one whose instances each name their own. A kind in `optional`
        that cannot be found is left out, not a problem."""
        assert self.locate is not None, "tools are located by the resolver of a whole file"
        tools: dict[str, Tool] = {}
        used = {t.kind for t in self.cfg.instances.values() if _own_executable(t) is None}
        used |= also
        if self.cfg.defaults:
            used.add(DEFAULT_KIND)  # `[defaults]` holds llama-server keys to check
        for kind in sorted(used & set(BACKENDS)):
            backend = BACKENDS[kind]
            key = backend.executable_key
            try:
                tools[kind] = self.locate(backend, self._anchored(getattr(self.cfg.daemon, key)))
            except CatalogError as exc:
                if kind in optional and kind not in {t.kind for t in self.cfg.instances.values()}:
                    continue
                where = where_is(self.path, self.text, ("daemon", key))
                self.problems.append(f"{where}: {exc}")
        return tools

    def all(self, tools: dict[str, Tool]) -> dict[str, InstanceSpec]:
        """Every instance that resolved, in the order its backend needs (RPC workers
        before the heads that name them)."""
        tables = self.cfg.instances
        ctx = ResolveContext(
            tools=tools,
            defaults=self.cfg.defaults,
            peers=frozenset(p.name for p in self.cfg.fleet.peers),
            resolved={},
            own_keys=tuple(InstanceTable.model_fields),
            report_at=lambda prefix: self.problem_at(*prefix),
            base_dir=self.path.parent,
        )
        specs: dict[str, InstanceSpec] = {}
        ordered = sorted(tables, key=lambda n: getattr(BACKENDS.get(tables[n].kind), "order", 0))
        for name in ordered:
            spec = self._one(name, ctx)
            if spec is not None:
                specs[name] = spec
                ctx.resolved = specs
        self._port_clashes(specs)
        return {name: specs[name] for name in tables if name in specs}

    def _one(self, name: str, ctx: ResolveContext) -> InstanceSpec | None:
        table, before = self.cfg.instances[name], len(self.problems)
        problem = self.problem_at("instances", name)
        backend = BACKENDS.get(table.kind)
        if backend is None:
            close = difflib.get_close_matches(table.kind, BACKENDS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else f" (one of: {', '.join(BACKENDS)})"
            problem(("kind",), f"unknown kind {table.kind!r}{hint}")
            return None
        keys = dict(table.model_extra or {})
        own = self._own_tool(backend, keys.pop(backend.executable_key, None), problem)
        if own is not None:  # its keys are checked against its own executable
            ctx = dataclasses.replace(ctx, tools={**ctx.tools, backend.kind: own})
        elif backend.executable_key in (table.model_extra or {}):
            return None  # its own executable is missing: reported above
        elif table.kind not in ctx.tools:
            return None  # its executable is missing: reported once under [daemon]
        knobs = self._knobs(name, problem)
        base = InstanceSpec(
            name=name,
            host="127.0.0.1",
            port=0,
            model=None,
            settings=(),
            args=tuple(table.args),
            env=_env(table.env),
            # An on-demand instance waits for its first request, whatever autostart says.
            autostart=table.autostart and not table.on_demand,
            watch_model=table.watch_model,
            knobs=knobs or Knobs(),
            kind=backend.kind,
            on_demand=table.on_demand,
            idle_timeout=table.idle_timeout,
            pinned=table.evict == "never",
            aliases=tuple(table.aliases),
            max_body=body_size(table.max_body) if table.max_body else None,
            memory_estimate=byte_size(table.memory_estimate) if table.memory_estimate else None,
            prompt=merged(self.stores.get(name), table.system, table.stop),
            tool=own,
            prompt_cache=instance_cache(self.cfg, self.path.parent, name, table),
            cache_swa_full=table.cache_swa_full,
        )
        spec = backend.resolve(base, keys, ctx, problem)
        if len(self.problems) > before or knobs is None:
            return None
        return spec

    def _anchored(self, configured: str | None) -> str | None:
        """A path with a `/` is the config file's; a bare name is looked up on PATH."""
        if configured and "/" in configured:
            return str(anchored(configured, self.path.parent))
        return configured

    def _own_tool(self, backend: Backend, value: Any, problem: Problem) -> Tool | None:
        """The executable an instance names itself (`llama_server = ...` in its table)."""
        key = backend.executable_key
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            problem((key,), "must be a path, or a name on PATH")
            return None
        if self.locate is None:
            problem((key,), "is not taken here")
            return None
        try:
            return self.locate(backend, self._anchored(value))
        except CatalogError as exc:
            problem((key,), str(exc))
            return None

    def _knobs(self, name: str, problem: Problem) -> Knobs | None:
        merged = self.cfg.supervise.model_dump() | self.cfg.instances[name].supervise
        try:
            s = SuperviseSettings.model_validate(merged)
        except PydanticError as exc:
            for err in exc.errors(include_url=False):
                problem(("supervise", str(err["loc"][-1])), describe(err, ("supervise",)))
            return None
        return Knobs(**s.model_dump())

    def listener_clashes(self, specs: dict[str, InstanceSpec], key: str, listen: str) -> None:
        """Instances bound where one of llamad's own listeners (`key`, at `listen`) is."""
        host, _, port = listen.rpartition(":")
        host = host.strip("[]")
        for spec in specs.values():
            if str(spec.port) == port and same_address(spec.host, host):
                self.problem_at("instances", spec.name)(
                    ("port",), f"port {spec.port} on {spec.host} is {key} ({listen})"
                )

    def _port_clashes(self, specs: dict[str, InstanceSpec]) -> None:
        seen: dict[int, list[InstanceSpec]] = {}
        for spec in specs.values():
            for other in seen.get(spec.port, []):
                if same_address(spec.host, other.host):
                    self.problem_at("instances", spec.name)(
                        ("port",),
                        f"port {spec.port} on {spec.host} is already used by "
                        f"instances.{other.name}",
                    )
            seen.setdefault(spec.port, []).append(spec)


def _own_executable(table: InstanceTable) -> Any:
    """What the table's own executable key (`llama_server` for llama-server) holds."""
    backend = BACKENDS.get(table.kind)
    return None if backend is None else (table.model_extra or {}).get(backend.executable_key)


def _env(values: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    as_text = {k: ("1" if v else "0") if isinstance(v, bool) else str(v) for k, v in values.items()}
    return tuple(sorted(as_text.items()))
