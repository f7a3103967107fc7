"""A cluster is not a home: what asking every peer costs a node when there are many.

Every llamad with `[gateway] fleet = true` asks each peer what it serves every 5 s: N
nodes make N x (N - 1) polls. Stand-in peers (`status_stand_in.py`: one process, a
port per peer, documents of a real llamad's shape and size) play 50 and 200 peers on
loopback; one real llamad polls them. Rows: that llamad's CPU (user + system, % of one
core) over a window once it knows every peer and they have all answered 304 long enough
to be asked at the longest interval, against the same llamad with no peer (the floor);
and the bytes per second on the wire, both ways, from the stand-ins' counts. The
stand-ins' own CPU is not counted: it is the peers' share (a real llamad answers a 304
from the gateway's books, without asking any process).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from typing import Any

import httpx
import psutil

from bench.common import Context, Result, instance_keys, wait_for
from bench.procs import Daemon
from llamad.gateway.fleet.models import REFRESH_S, UNCHANGED_MAX_S

PEERS = (50, 200)
# After the first answers: 5, 10, 20 and 30 s unasked, each peer at its longest interval.
SETTLE_S = REFRESH_S + 2 * REFRESH_S + 4 * REFRESH_S + UNCHANGED_MAX_S
TARGET_PCT = 2.0  # of one core, at 50 peers
READ = "fleet-polls-read-token-" + "r" * 24


def _stand_ins(ctx: Context, count: int) -> tuple[subprocess.Popen[bytes], int, list[int]]:
    counts, ports = ctx.port(), [ctx.port() for _ in range(count)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "bench.status_stand_in", str(counts), *map(str, ports)],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    if proc.stdout.readline().strip() != b"ready":
        proc.kill()
        proc.wait()
        raise RuntimeError("the stand-in peers did not start")
    return proc, counts, ports


def _counts(port: int) -> dict[str, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/counts", timeout=5) as answer:
        counted: dict[str, int] = json.load(answer)
    return counted


def _front(ctx: Context, name: str, ports: list[int]) -> tuple[Daemon, str]:
    token = ctx.root / f"{name}-read.token"
    token.write_text(READ + "\n")
    token.chmod(0o600)
    peers: list[object] = [
        {"name": f"p{i}", "url": f"http://127.0.0.1:{port}"} for i, port in enumerate(ports)
    ]
    gw = ctx.port()
    daemon = Daemon(ctx, name, {}, gateway={"listen": f"127.0.0.1:{gw}", "fleet": True},
                    tables={"fleet": {"peers": peers, "token_file": token}})  # fmt: skip
    return daemon, f"http://127.0.0.1:{gw}"


def _models(url: str) -> int:
    try:
        return len(httpx.get(f"{url}/v1/models", timeout=5).json()["data"])
    except (httpx.HTTPError, ValueError, KeyError):
        return 0


def _cpu(daemon: Daemon, window: float) -> float:
    """The daemon's CPU over `window` seconds, as % of one core."""
    proc = psutil.Process(daemon.proc.pid)
    before, t0 = proc.cpu_times(), time.monotonic()
    time.sleep(window)  # the measurement window itself, not a synchronisation
    after, took = proc.cpu_times(), time.monotonic() - t0
    used = (after.user - before.user) + (after.system - before.system)
    return 100.0 * used / took


def _measure(ctx: Context, count: int, window: float) -> tuple[list[float], dict[str, Any]]:
    """CPU samples of a llamad polling `count` stand-ins, and the wire's figures."""
    stand, counts_port, ports = _stand_ins(ctx, count)
    daemon: Daemon | None = None
    try:
        daemon, url = _front(ctx, f"polls-{count}", ports)
        # Three own models per peer and one they all share.
        wait_for(lambda: _models(url) >= 3 * count + 1, 120.0, f"learning {count} peers")
        time.sleep(SETTLE_S)  # the steady state of a fleet where nothing changes
        before, t0 = _counts(counts_port), time.monotonic()
        samples = [_cpu(daemon, window) for _ in range(ctx.reps(3, 1))]
        after, took = _counts(counts_port), time.monotonic() - t0
    finally:
        if daemon is not None:
            daemon.stop()
        stand.kill()
        stand.wait()
    wire = {k: (after[k] - before[k]) / took for k in after}
    return samples, wire


def run(ctx: Context) -> list[Result]:
    """The floor (no peer), then 50 and 200 stand-in peers."""
    window = 10.0 if ctx.quick else 20.0
    floor_daemon, _ = _front(ctx, "polls-0", [])
    try:
        time.sleep(5.0)  # past start-up: the floor is the idle daemon
        floor = [_cpu(floor_daemon, window) for _ in range(ctx.reps(3, 1))]
    finally:
        floor_daemon.stop()
    rows = []
    for count in PEERS:
        samples, wire = _measure(ctx, count, window)
        note = (
            f"{wire['requests']:.1f} polls/s, {wire['not_modified']:.1f} of them 304; "
            f"in {wire['bytes_in']:.0f} B/s, out {wire['bytes_out']:.0f} B/s; "
            "floor: the same llamad with no peer; noisy on a shared machine"
        )
        limit = TARGET_PCT if count == 50 else None
        rows.append(
            Result(f"fleet polls: CPU per node, {count} peers", len(samples), "% core",
                   samples, floor, "overhead", "overhead" if limit else "none", limit,
                   f"< {TARGET_PCT} % of a core" if limit else "-", note,
                   extra={"wire_per_s": {k: round(v, 1) for k, v in wire.items()}})
        )  # fmt: skip
        total = wire["bytes_in"] + wire["bytes_out"]
        rows.append(
            Result(f"fleet polls: bytes per second, {count} peers", 1, "B/s", [total], [0.0],
                   "overhead", "none", None, "-", "both ways, headers included")
        )  # fmt: skip
    return rows + _serving(ctx)


def _serving(ctx: Context) -> list[Result]:
    """The peer's side: a real llamad with four instances behind its gateway answering
    asks one after another, its CPU per ask: `/v1/fleet` with a matching ETag (304)
    against the whole `/v1/status` (the floor: what each ask cost before)."""
    token = ctx.root / "polls-serve-read.token"
    token.write_text(READ + "\n")
    token.chmod(0o600)
    admin = ctx.root / "polls-serve-admin.token"
    admin.write_text("a" * 40 + "\n")
    admin.chmod(0o600)
    ctl = ctx.port()
    names = [f"m{k}" for k in range(4)]
    remote = {"listen": f"127.0.0.1:{ctl}", "read_token_file": token, "token_file": admin}
    instances = {n: instance_keys(ctx, ctx.port()) for n in names}
    # A fixed budget: `auto` follows the machine's free memory, which a shared machine
    # moves by more than the document's steps.
    gateway: dict[str, object] = {"listen": f"127.0.0.1:{ctx.port()}", "memory_budget": "8GiB"}
    daemon = Daemon(ctx, "polls-serve", instances, gateway=gateway, daemon={"remote": remote})
    asks = ctx.reps(400, 100)
    try:
        daemon.wait_running(names, timeout=90.0)
        proc = psutil.Process(daemon.proc.pid)
        with httpx.Client(base_url=f"http://127.0.0.1:{ctl}", timeout=10) as client:
            read = {"Authorization": f"Bearer {READ}"}
            etag = client.get("/v1/fleet", headers=read).headers["etag"]
            conditional = {**read, "If-None-Match": etag}
            ours = [_per_ask(proc, client, "/v1/fleet", conditional, asks, 304) for _ in range(3)]
            floor = [_per_ask(proc, client, "/v1/status", read, asks, 200) for _ in range(3)]
    finally:
        daemon.stop()
    return [
        Result("fleet polls: a peer's CPU per ask", len(ours), "ms", ours, floor, "ratio",
               "none", None, "-", "a 304 of /v1/fleet (four instances); floor: the whole "
               "/v1/status, as every ask was before")
    ]  # fmt: skip


def _per_ask(
    proc: psutil.Process,
    client: httpx.Client,
    path: str,
    headers: dict[str, str],
    asks: int,
    status: int,
) -> float:
    """The daemon's CPU per ask of `path`, in ms, over `asks` asks in a row."""
    before = proc.cpu_times()
    for _ in range(asks):
        answer = client.get(path, headers=headers)
        if answer.status_code != status:
            raise RuntimeError(f"{path} answered {answer.status_code}, not {status}")
    after = proc.cpu_times()
    used = (after.user - before.user) + (after.system - before.system)
    return 1000.0 * used / asks
