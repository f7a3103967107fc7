"""Which backend runs which kind: the one place that maps `kind` to code.

A backend's module is imported the first time its kind is asked for, so a daemon runs
only the code of the kinds its config uses: an llama-server config never loads the MLX
backend on its way to the first launch.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from llamad.backends.base import Backend
from llamad.backends.spec import InstanceSpec

DEFAULT_KIND = "llama-server"  # an instance table without `kind`


def _llama_server() -> Backend:
    from llamad.backends.llama_server import LlamaServer

    return LlamaServer()


def _rpc_worker() -> Backend:
    from llamad.backends.rpc_worker import RpcWorker

    return RpcWorker()


def _mlx() -> Backend:
    from llamad.backends.mlx.backend import Mlx

    return Mlx()


class _Registry(Mapping[str, Backend]):
    """kind -> backend; every kind is listed, a backend is built when first looked up."""

    def __init__(self, makers: dict[str, Callable[[], Backend]]) -> None:
        self._makers = makers
        self._built: dict[str, Backend] = {}

    def __getitem__(self, kind: str) -> Backend:
        backend = self._built.get(kind)
        if backend is None:
            backend = self._built[kind] = self._makers[kind]()
        return backend

    def __iter__(self) -> Iterator[str]:
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)


BACKENDS: Mapping[str, Backend] = _Registry(
    {DEFAULT_KIND: _llama_server, "rpc-worker": _rpc_worker, "mlx": _mlx}
)


def backend_for(kind: str) -> Backend:
    """The backend for `kind`; config validation guarantees it exists."""
    return BACKENDS[kind]


def kinds() -> tuple[str, ...]:
    """Every kind a config may name."""
    return tuple(BACKENDS)


def template_line(spec: InstanceSpec) -> str | None:
    """The line status gives of the chat template `spec` runs with (None: its kind or
    status does not say)."""
    line = backend_for(spec.kind).status_extras(spec).get("chat_template")
    return line if isinstance(line, str) else None
