"""llama.cpp RPC: `rpc-worker` instances (ggml-rpc-server) and the heads that use them.

A worker has no `/health`; it is ready when its port accepts a TCP connection. RPC has
no authentication, so a worker binds beyond loopback only with `allow_remote = true`.
A head lists its workers in `rpc`; local worker names become `host:port` and make the
head wait for them, and restart when one of them restarts (a head that lost a worker
stays up, answers 200 on /health, and aborts on the next request). `peer/worker` names
a worker on a `[fleet]` peer: the same, over the peer's control API (`fleet/remote_workers.py`).
"""

from __future__ import annotations

import asyncio
import difflib
import time
from collections.abc import Callable, Collection
from typing import Any

from llamad.backends.binaries import CatalogError
from llamad.backends.catalog_cache import run_flag
from llamad.backends.probes import Health, local_cause, local_failure
from llamad.backends.tool import ServerCommand
from llamad.common.clock import utcnow
from llamad.common.hosts import is_loopback

KIND = "rpc-worker"
# Keys of an rpc-worker table besides llamad's own (args, env, autostart, supervise).
WORKER_KEYS = ("host", "port", "device", "cache", "threads", "mem", "allow_remote")

Problem = Callable[[tuple[str, ...], str], None]


def worker_args(
    keys: dict[str, Any], rpc_help: str, problem: Problem
) -> tuple[str, int, list[str]]:
    """(host, port, argv tail) for ggml-rpc-server, from an rpc-worker table's keys."""
    for key in keys:
        if key not in WORKER_KEYS:
            close = difflib.get_close_matches(key, WORKER_KEYS, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            problem((key,), f"unknown key {key!r} for an rpc-worker{hint}")
    host = str(keys.get("host", "127.0.0.1"))
    port = keys.get("port")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        problem(("port",), "is required: a TCP port from 1 to 65535")
        port = 0
    if not is_loopback(host) and keys.get("allow_remote") is not True:
        problem(
            ("host",),
            f"{host} is beyond loopback and RPC has no authentication; "
            "set allow_remote = true only on a private network",
        )
    argv = ["--host", host, "--port", str(port)]
    if "device" in keys:
        argv += ["--device", ",".join(map(str, _as_list(keys["device"])))]
    if "threads" in keys:
        argv += ["--threads", str(keys["threads"])]
    if keys.get("cache") is True:
        argv.append("--cache")
    if "mem" in keys:
        if "--mem" not in rpc_help:
            problem(("mem",), "this ggml-rpc-server has no --mem option")
        argv += ["--mem", str(keys["mem"])]
    return host, port, argv


def _as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def rpc_help(binary: ServerCommand) -> str:
    """ggml-rpc-server's `--help`, to check the options a worker table uses."""
    try:
        run = run_flag(binary, "--help")
    except CatalogError:
        return ""
    return run.stdout + run.stderr


def head_servers(
    value: Any, workers: dict[str, tuple[str, int]], peers: Collection[str], problem: Problem
) -> tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]:
    """Resolve a head's `rpc` list: (LLAMA_ARG_RPC value so far, local worker names it
    waits for, (peer, worker) pairs whose addresses are asked for at launch)."""
    servers, local, remote = [], [], []
    # A local worker named by its address is that worker: the head must wait for it and
    # restart with it, as when it is named by name.
    by_address = {_address(host, port): name for name, (host, port) in workers.items()}
    for item in _as_list(value):
        text = by_address.get(_address_of(str(item)) or "", str(item))
        if text in workers:
            host, port = workers[text]
            servers.append(f"{host}:{port}")
            local.append(text)
        elif "/" in text:
            peer, _, worker = text.partition("/")
            if peer not in peers:
                problem(("rpc",), f"{text!r}: no [fleet] peer named {peer!r}")
            elif not worker or "/" in worker:
                problem(("rpc",), f"{text!r}: must be PEER/WORKER")
            remote.append((peer, worker))
        elif ":" in text:
            servers.append(text)
        else:
            problem(("rpc",), f"{text!r} is neither a local rpc-worker nor host:port")
    return ",".join(servers), tuple(local), tuple(remote)


def _address(host: str, port: int) -> str:
    return f"{'127.0.0.1' if is_loopback(host) else host}:{port}"


def _address_of(text: str) -> str | None:
    """`host:port` normalised like a local worker's address, or None if `text` isn't one."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isascii() or not port.isdigit():
        return None
    return _address(host.strip("[]"), int(port))


async def probe_tcp(host: str, port: int, timeout: float) -> Health:
    """A worker's health: does its port accept a connection?"""
    t0 = time.perf_counter()
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(host, port)
    except (OSError, TimeoutError) as exc:
        if (cause := local_cause(exc)) is not None:
            return local_failure(t0, cause)
        elapsed = (time.perf_counter() - t0) * 1000
        # ggml-rpc-server serves one client at a time with a listen backlog of 1: while a
        # head is connected, the probes we left in its queue fill it and a new connect
        # gets no answer. A worker that serves a head is alive.
        if isinstance(exc, TimeoutError) and await asyncio.to_thread(_serving, port):
            return Health(True, None, elapsed, utcnow(), None)
        error = "no answer" if isinstance(exc, TimeoutError) else "connection refused"
        return Health(False, None, elapsed, utcnow(), error)
    writer.close()
    # A worker serves one client at a time; let it see the close before the head connects.
    await writer.wait_closed()
    return Health(True, None, (time.perf_counter() - t0) * 1000, utcnow(), None)


def _serving(port: int) -> bool:
    """Whether some client holds an established connection to our `port`."""
    import psutil  # only for a worker that did not answer: not on the way to a launch

    try:
        conns = psutil.net_connections(kind="tcp")
    except (psutil.AccessDenied, OSError):  # macOS without root: no way to tell
        return False
    return any(
        c.status == psutil.CONN_ESTABLISHED and c.laddr and c.laddr.port == port for c in conns
    )
