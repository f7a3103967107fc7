"""Local replicas, one box with two GPUs: one llamad, two instances of the paced model
sharing the alias `paced` (4 slots and one generation thread each, as the fleet's B and
C), against one of them asked for by its own name, which reaches it alone, through the
same gateway. Run after the fleet's daemons have stopped."""

from __future__ import annotations

from bench import replica_throughput
from bench.common import Context, Result
from bench.gateway_sse import PACED
from bench.procs import Daemon
from bench.replica_throughput import Way
from llamad.daemon.tinymodel import write_tiny_model

ALIAS = "paced"
NAMES = ("paced-0", "paced-1")


def rows(ctx: Context) -> list[Result]:
    """The local throughput rows, from one llamad started for them."""
    paced = write_tiny_model(ctx.root / "paced.gguf", shape=PACED)
    keys = {"model": paced, "threads": 1, "n_parallel": 4, "ctx_size": 1024, "aliases": [ALIAS]}
    gw = ctx.port()
    instances: dict[str, dict[str, object]] = {n: {**keys, "port": ctx.port()} for n in NAMES}
    daemon = Daemon(ctx, "fleet-local", instances, gateway={"listen": f"127.0.0.1:{gw}"})
    try:
        daemon.wait_running(list(NAMES), timeout=120.0)
        url = f"http://127.0.0.1:{gw}"
        return replica_throughput.rows(ctx, "local", Way(url, NAMES[0]), Way(url, ALIAS))
    finally:
        daemon.stop()
