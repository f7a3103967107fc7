"""`kind = "rpc-worker"`: ggml-rpc-server, lending a machine's devices to RPC heads.

A worker has no `/health`; it is ready when its port accepts a TCP connection (rpc.py).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from llamad.backends import rpc
from llamad.backends.base import ProbeFn, Problem, ResolveContext
from llamad.backends.binaries import find_rpc_server
from llamad.backends.catalog_cache import version_of
from llamad.backends.probes import Prober
from llamad.backends.serving import Serving
from llamad.backends.spec import InstanceSpec
from llamad.backends.tool import ServerCommand, Tool
from llamad.lifecycle.states import Knobs


class RpcWorker:
    """The rpc-worker backend."""

    kind = rpc.KIND
    executable_key = "rpc_server"
    order = 0  # heads name workers, so workers resolve first
    serves_http = False  # the gateway routes requests to it

    def find(self, configured: str | None, cache_dir: Path) -> ServerCommand:
        """`[daemon] rpc_server`, else PATH, else the pip wheel's copy."""
        return ServerCommand(find_rpc_server(configured))

    def inspect(self, command: ServerCommand, cache_dir: Path) -> Tool:
        """Its `--help` text, to check the options a worker table uses."""
        return Tool(self.kind, command, version_of(command), rpc.rpc_help(command))

    def resolve(
        self, base: InstanceSpec, keys: dict[str, Any], ctx: ResolveContext, problem: Problem
    ) -> InstanceSpec:
        """host, port and the ggml-rpc-server flags from the worker table's keys."""
        host, port, argv = rpc.worker_args(keys, ctx.tools[self.kind].details, problem)
        return dataclasses.replace(
            base,
            host=host,
            port=port,
            args=(*argv, *base.args),
            watch_model=False,
            prompt_cache=None,
        )

    def command(
        self, spec: InstanceSpec, tool: Tool, remote: Mapping[str, str]
    ) -> tuple[list[str], dict[str, str]]:
        """Everything is on the command line; ggml-rpc-server reads no settings env."""
        return tool.command.argv(*spec.args), {}

    def probe(
        self,
        spec: InstanceSpec,
        prober: Prober,
        knobs: Callable[[], Knobs],
        busy: Callable[[], bool],
    ) -> ProbeFn:
        """A TCP connect to the worker's port."""
        host, port = spec.probe_host, spec.port
        return lambda timeout: rpc.probe_tcp(host, port, timeout)

    def request_body(self, spec: InstanceSpec, body: bytes) -> bytes:
        """Unchanged: never proxied (serves_http is false)."""
        return body

    def memory_estimate(self, spec: InstanceSpec) -> int | None:
        """None: the gateway reads the GGUF (weights plus KV cache) itself."""
        return None

    def watched(self, spec: InstanceSpec) -> tuple[Path, ...]:
        """Workers load no model of their own."""
        return ()

    def status_extras(self, spec: InstanceSpec) -> dict[str, Any]:
        """A worker says what it is."""
        return {"kind": self.kind}

    def serving(self, spec: InstanceSpec) -> Serving:
        """Nothing: a worker serves no model over HTTP."""
        return Serving()
