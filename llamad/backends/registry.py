"""Which backend runs which kind: the one place that maps `kind` to code."""

from __future__ import annotations

from llamad.backends.base import Backend
from llamad.backends.llama_server import LlamaServer
from llamad.backends.mlx.backend import Mlx
from llamad.backends.rpc_worker import RpcWorker

DEFAULT_KIND = LlamaServer.kind
BACKENDS: dict[str, Backend] = {b.kind: b for b in (LlamaServer(), RpcWorker(), Mlx())}


def backend_for(kind: str) -> Backend:
    """The backend for `kind`; config validation guarantees it exists."""
    return BACKENDS[kind]


def kinds() -> tuple[str, ...]:
    """Every kind a config may name."""
    return tuple(BACKENDS)
