"""What to launch for each `[instances.NAME]`: keys checked against the binary, then
frozen into an `InstanceSpec`."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import ValidationError as PydanticError

from llamad.backends import rpc
from llamad.backends.catalog import Catalog, render
from llamad.backends.spec import WILDCARDS, InstanceSpec
from llamad.common.modelfile import model_problem
from llamad.common.tokenfile import TokenFileError, check_private
from llamad.config.redact import REDACTED, is_secret_key, scrub
from llamad.config.schema import (
    ConfigFile,
    InstanceTable,
    SuperviseSettings,
    Value,
    describe,
    where_is,
)
from llamad.lifecycle.states import Knobs

Problem = Callable[[tuple[str, ...], str], None]

_MODEL_SOURCES = (
    "LLAMA_ARG_MODEL",
    "LLAMA_ARG_HF_REPO",
    "LLAMA_ARG_MODEL_URL",
    "LLAMA_ARG_DOCKER_REPO",
)
_SECRET_ENVS = {"LLAMA_API_KEY", "HF_TOKEN"}


class Resolver:
    """Resolves every instance of one config file, collecting problems as lines."""

    def __init__(
        self, cfg: ConfigFile, path: Path, text: str, catalog: Catalog, rpc_help: str = ""
    ) -> None:
        self.cfg, self.path, self.text, self.catalog = cfg, path, text, catalog
        self.rpc_help = rpc_help
        self.problems: list[str] = []

    def problem_at(self, *prefix: str) -> Problem:
        """A reporter for keys under `prefix`, e.g. ('instances', 'qwen')."""

        def report(keys: tuple[str, ...], msg: str) -> None:
            where = where_is(self.path, self.text, (*prefix, *keys))
            self.problems.append(f"{where}: {'.'.join((*prefix, *keys))}: {msg}")

        return report

    def all(self) -> dict[str, InstanceSpec]:
        """Every instance that resolved; workers first, so heads can name them."""
        rendered = self.render(self.cfg.defaults, self.problem_at("defaults"))
        defaults = {k: v for k, v in rendered.items() if v is not None}
        tables = self.cfg.instances
        specs: dict[str, InstanceSpec] = {}
        for name in sorted(tables, key=lambda n: tables[n].kind != rpc.KIND):
            spec = (
                self._worker(name)
                if tables[name].kind == rpc.KIND
                else self._server(name, defaults, specs)
            )
            if spec is not None:
                specs[name] = spec
        self._port_clashes(specs)
        return {name: specs[name] for name in tables if name in specs}

    def render(self, values: dict[str, Value], problem: Problem) -> dict[str, str | None]:
        """Map each key to its env name and render its value; unknown keys are problems."""
        out: dict[str, str | None] = {}
        for key, value in values.items():
            look = self.catalog.lookup(key)
            if look is None:
                hint = self.catalog.suggest(key, extra=InstanceTable.model_fields)
                problem(
                    (key,), f"unknown key {key!r}" + (f" (did you mean {hint}?)" if hint else "")
                )
                continue
            try:
                out[look.env] = render(look, value)
            except ValueError as exc:
                if is_secret_key(key) or is_secret_key(look.env):
                    problem((key,), f"{scrub(str(exc), value)} (got {REDACTED})")
                else:
                    problem((key,), f"{exc} (got {value!r})")
        return out

    def _server(
        self, name: str, defaults: dict[str, str], specs: dict[str, InstanceSpec]
    ) -> InstanceSpec | None:
        table, before = self.cfg.instances[name], len(self.problems)
        problem = self.problem_at("instances", name)
        extra: dict[str, Any] = dict(table.model_extra or {})
        rpc_value = extra.pop("rpc", None)
        settings = dict(defaults)
        for key, value in self.render(extra, problem).items():
            # None means "leave unset": a false value-less flag, or undoing a default.
            if value is None:
                settings.pop(key, None)
            else:
                settings[key] = value
        workers: tuple[str, ...] = ()
        remote: tuple[tuple[str, str], ...] = ()
        if rpc_value is not None:
            local = {n: (s.probe_host, s.port) for n, s in specs.items() if s.kind == rpc.KIND}
            peers = {p.name for p in self.cfg.fleet.peers}
            servers, workers, remote = rpc.head_servers(rpc_value, local, peers, problem)
            if servers or not remote:  # remote addresses are appended at launch
                settings["LLAMA_ARG_RPC"] = servers
        if not any(env in settings for env in _MODEL_SOURCES):
            problem((), "model is required")
        model = Path(settings["LLAMA_ARG_MODEL"]) if "LLAMA_ARG_MODEL" in settings else None
        if (bad_model := model_problem(model)) is not None:
            problem(("model",), bad_model)
        secrets = self._secrets(settings, problem)
        port = self._port(settings.get("LLAMA_ARG_PORT"), problem)
        host = settings.setdefault("LLAMA_ARG_HOST", "127.0.0.1")
        if host.endswith(".sock"):
            problem(("host",), "unix-socket hosts are not supported; use an address")
        self._check_args(table.args, settings, problem)
        for key in table.env:
            if key.startswith("LLAMA_"):
                problem(("env", key), "set llama-server options as instance keys, not in env")
        knobs = self._knobs(name, problem)
        if len(self.problems) > before or knobs is None:
            return None
        return InstanceSpec(
            name=name,
            host=host,
            port=port,
            model=model,
            settings=tuple(sorted(settings.items())),
            args=tuple(table.args),
            env=_env(table.env),
            autostart=table.autostart,
            watch_model=table.watch_model,
            knobs=knobs,
            secrets=secrets,
            workers=workers,
            remote_workers=remote,
        )

    def _worker(self, name: str) -> InstanceSpec | None:
        table, before = self.cfg.instances[name], len(self.problems)
        problem = self.problem_at("instances", name)
        host, port, argv = rpc.worker_args(dict(table.model_extra or {}), self.rpc_help, problem)
        knobs = self._knobs(name, problem)
        if len(self.problems) > before or knobs is None:
            return None
        return InstanceSpec(
            name=name,
            host=host,
            port=port,
            model=None,
            settings=(),
            args=(*argv, *table.args),
            env=_env(table.env),
            autostart=table.autostart,
            watch_model=False,
            knobs=knobs,
            kind=rpc.KIND,
        )

    @staticmethod
    def _port(text: str | None, problem: Problem) -> int:
        # ASCII only: int() also reads fullwidth digits, which llama-server does not.
        port = int(text) if text and text.isascii() and text.isdigit() else 0
        if not text:
            problem(("port",), "is required: a TCP port from 1 to 65535")
        elif not 0 < port < 65536:
            problem(("port",), f"must be a TCP port from 1 to 65535 (got {text!r})")
        return port

    @staticmethod
    def _secrets(settings: dict[str, str], problem: Problem) -> tuple[str, ...]:
        secrets = [settings[e] for e in _SECRET_ENVS if e in settings]
        key_file = settings.get("LLAMA_ARG_API_KEY_FILE")
        if key_file:
            try:
                lines = Path(key_file).read_text(encoding="utf-8").splitlines()
                secrets += [ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")]
                # Held to the token files' rule: keys other users can read are leaked.
                check_private(Path(key_file))
            except OSError as exc:
                problem(("api_key_file",), f"cannot read key file {key_file}: {exc.strerror}")
            except TokenFileError as exc:
                problem(("api_key_file",), str(exc))
        return tuple(s for s in secrets if s)

    def _check_args(self, args: list[str], settings: dict[str, str], problem: Problem) -> None:
        for i, raw in enumerate(args):
            # Stripped for the checks: " --api-key" must not slip past the secret rule.
            arg = raw.strip()
            if not arg.startswith("-") or _is_number(arg):
                continue
            option = self.catalog.flag(arg.split("=", 1)[0])
            if option is None:
                problem(("args",), f"unknown llama-server flag {arg!r} (args[{i}])")
            elif option.env in ("LLAMA_ARG_HOST", "LLAMA_ARG_PORT"):
                problem(("args",), f"{arg} is set with the `host`/`port` keys, not in args")
            elif option.env in _SECRET_ENVS:
                problem(("args",), f"{arg} would show the key in `ps`; use api_key_file instead")
            elif option.env in settings:
                problem(("args",), f"{arg} is also set by a key ({option.env}); set it once")

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


_LOOPBACK_NAMES = {"localhost": "127.0.0.1", "ip6-localhost": "::1"}


def same_address(a: str, b: str) -> bool:
    """Whether two bind hosts can collide on one port: equal once `localhost` is read as
    127.0.0.1, or either is a wildcard."""
    a, b = (_LOOPBACK_NAMES.get(h.lower(), h) for h in (a, b))
    return a == b or bool({a, b} & WILDCARDS)


def _env(values: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    as_text = {k: ("1" if v else "0") if isinstance(v, bool) else str(v) for k, v in values.items()}
    return tuple(sorted(as_text.items()))


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True
