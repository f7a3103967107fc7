"""The Backend for `kind = "mlx"`: mlx_lm.server, configured on its command line.

Keys are checked against the installed server's own `--help`; the model must resolve
locally, since the server runs with HF_HUB_OFFLINE=1 and would otherwise answer
`/v1/models` with nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from llamad.backends.base import ProbeFn, Problem, ResolveContext
from llamad.backends.mlx.cache_limit import FLAG, has_limit, limit_in, machine_default
from llamad.backends.mlx.model import DEFAULT_MODEL, WEIGHTS, hub_cache, pin_model, resolve_model
from llamad.backends.mlx.options import RESERVED, MlxOptions, render_flag
from llamad.backends.mlx.probe import DeepProbe
from llamad.backends.mlx.tool import find_server, load_options
from llamad.backends.probes import Prober
from llamad.backends.serving import Serving
from llamad.backends.spec import InstanceSpec
from llamad.backends.tool import ServerCommand, Tool
from llamad.backends.values import is_number, port_number
from llamad.common.hosts import is_loopback
from llamad.lifecycle.states import Knobs

KIND = "mlx"
_NO_KEY = "mlx_lm.server has no API key: remove it and bind the server to loopback"
_REMOTE = "mlx_lm.server has no API key; set allow_remote = true only on a private network"
_NO_CACHE = "mlx_lm.server keeps no prompt cache across processes"


class Mlx:
    """The mlx_lm.server backend."""

    kind = KIND
    executable_key = "mlx_server"
    order = 1
    serves_http = True  # OpenAI-compatible: the gateway may route to it

    def find(self, configured: str | None, cache_dir: Path) -> ServerCommand:
        """`[daemon] mlx_server`, else PATH, else beside llamad's own Python."""
        return ServerCommand(find_server(configured))

    def inspect(self, command: ServerCommand, cache_dir: Path) -> Tool:
        """Its options and the mlx-lm version, cached per executable."""
        options = load_options(command.path, cache_dir)
        return Tool(KIND, command, options.version, options)

    def resolve(
        self, base: InstanceSpec, keys: dict[str, Any], ctx: ResolveContext, problem: Problem
    ) -> InstanceSpec:
        """model, host and port, then the server's flags from the table's other keys."""
        options: MlxOptions = ctx.tools[KIND].details
        model_value = keys.pop("model", None)
        port = port_number(keys.pop("port", None), problem)
        host = str(keys.pop("host", "127.0.0.1"))
        if host.endswith(".sock"):
            problem(("host",), "unix-socket hosts are not supported; use an address")
        elif not is_loopback(host) and keys.pop("allow_remote", False) is not True:
            problem(("host",), f"{host} is beyond loopback and {_REMOTE}")
        keys.pop("allow_remote", None)
        for key in ("api_key", "api_key_file"):
            if keys.pop(key, None) is not None:
                problem((key,), _NO_KEY)
        argv = _flags(options, keys, ctx, problem)
        _check_args(options, base.args, argv, problem)
        argv += _cache_limit(options, argv, list(base.args), problem)
        cache = hub_cache()
        directory = None
        if not isinstance(model_value, str) or not model_value.strip():
            problem(("model",), "is required: an MLX model directory or a cached repo id")
        else:
            try:
                directory = resolve_model(model_value, cache, ctx.base_dir).directory
            except ValueError as exc:
                problem(("model",), str(exc))
        settings = {"HF_HUB_OFFLINE": "1", "HF_HUB_CACHE": str(cache)}
        for key, _ in base.env:
            if key in settings:
                problem(("env", key), "llamad sets this for mlx instances")
        return dataclasses.replace(
            base,
            host=host,
            port=port,
            model=directory,
            settings=tuple(sorted(settings.items())),
            args=(*argv, *base.args),
            prompt_cache=None,
            cache_note=None if base.prompt_cache is None else _NO_CACHE,
        )

    def command(
        self, spec: InstanceSpec, tool: Tool, remote: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        """The server with model, host and port; offline, with a hub cache that exists."""
        settings = dict(spec.settings)
        with contextlib.suppress(OSError):  # the server then fails loudly in its own log
            Path(settings["HF_HUB_CACHE"]).mkdir(parents=True, exist_ok=True)
        where = ["--model", str(spec.model), "--host", spec.host, "--port", str(spec.port)]
        return tool.command.argv(*where, *spec.args), settings

    def probe(
        self,
        spec: InstanceSpec,
        prober: Prober,
        knobs: Callable[[], Knobs],
        busy: Callable[[], bool],
    ) -> ProbeFn:
        """`/health` plus one-token completions (probe.py says why)."""
        return DeepProbe(spec, prober, knobs, busy)

    def request_body(self, spec: InstanceSpec, body: bytes) -> bytes:
        """A proxied request's body, with the model pinned to the instance's own."""
        return pin_model(body)

    def memory_estimate(self, spec: InstanceSpec) -> int | None:
        """The weight files' size (MLX maps them whole) plus what its prompt caches may
        hold (`--prompt-cache-bytes`, which llamad sets unless the config does)."""
        weights = self.status_extras(spec)["model_bytes"]
        return weights + (limit_in(spec.args) or 0) if weights else None

    def watched(self, spec: InstanceSpec) -> tuple[Path, ...]:
        """The model's config.json and weights, unless `watch_model = false`."""
        if not spec.watch_model or spec.model is None:
            return ()
        weights = sorted(p for g in WEIGHTS for p in spec.model.glob(g))
        return (spec.model / "config.json", *weights)

    def status_extras(self, spec: InstanceSpec) -> dict[str, Any]:
        """The kind, and the weights' size: the memory the model needs at least."""
        files = self.watched(dataclasses.replace(spec, watch_model=True))[1:]
        size = 0
        for path in files:
            with contextlib.suppress(OSError):
                size += path.stat().st_size
        return {"kind": KIND, "model_bytes": size}

    def serving(self, spec: InstanceSpec) -> Serving:
        """Answers name the pinned model; the template is the model directory's own."""
        template = None
        if spec.model is not None:
            # transformers reads chat_template.jinja first, then tokenizer_config.json.
            files = [spec.model / "chat_template.jinja", spec.model / "tokenizer_config.json"]
            template = next((f for f in files if f.is_file()), None)
        return Serving(answer_name=DEFAULT_MODEL, template_file=template)


def _flags(
    options: MlxOptions, keys: dict[str, Any], ctx: ResolveContext, problem: Problem
) -> list[str]:
    argv: list[str] = []
    for key, value in keys.items():
        option = options.lookup(key)
        if option is None:
            hint = options.suggest(key, extra=ctx.own_keys)
            problem((key,), f"unknown key {key!r}" + (f" (did you mean {hint}?)" if hint else ""))
            continue
        try:
            argv += render_flag(option, value)
        except ValueError as exc:
            problem((key,), f"{exc} (got {value!r})")
    return argv


def _cache_limit(
    options: MlxOptions, from_keys: list[str], args: list[str], problem: Problem
) -> list[str]:
    """The prompt caches' limit llamad adds (cache_limit.py says why), or nothing: the
    config sets one (checked here: mlx_lm would refuse it only at start), or the
    installed server has no such option."""
    for where, argv in ((("prompt_cache_bytes",), from_keys), (("args",), args)):
        if has_limit(argv):
            if limit_in(argv) is None:
                problem(where, f'{FLAG} must be a size such as "4G", "500MB" or bytes')
            return []
    if options.flag(FLAG) is None:
        return []
    return [FLAG, str(machine_default())]


def _check_args(
    options: MlxOptions, args: tuple[str, ...], from_keys: list[str], problem: Problem
) -> None:
    for i, arg in enumerate(args):
        if not arg.startswith("-") or is_number(arg):
            continue
        flag = arg.split("=", 1)[0]
        option = options.flag(flag)
        if option is None:
            problem(("args",), f"unknown mlx_lm.server flag {arg!r} (args[{i}])")
        elif RESERVED.intersection(option.flags):
            problem(("args",), f"{arg} is set with the `model`/`host`/`port` keys, not in args")
        elif option.flags[-1] in from_keys:
            problem(("args",), f"{arg} is also set by a key; set it once")
