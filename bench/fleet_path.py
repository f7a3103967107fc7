"""The fleet path: a request relayed by one llamad to a `[fleet]` peer llamad on loopback,
which relays it to its llama-server, against the same request sent to that llama-server.

The peers benchmark's llamad is the peer (its control API on TCP, with a read token, is
how a front llamad learns its models); a front llamad with no instances of its own routes
every request to it. Rows: added latency p50 and p99, and the SSE time ratio, measured
the way the peers' are (`peer_rows.py`).
"""

from __future__ import annotations

import json
import secrets
from pathlib import Path

from bench import peer_rows
from bench.common import Context, Result, http_get, wait_for
from bench.procs import Daemon
from bench.targets import Target

NAME = "llamad-fleet"  # one word: the peer rows' names are split on spaces


def remote_keys(ctx: Context, port: int) -> tuple[dict[str, object], Path]:
    """`[daemon] remote` for the peer llamad: control on TCP at `port`, not advertised;
    and its read token's file, which the front llamad's `[fleet]` entry names."""
    keys = ctx.root / "fleet-tokens"
    keys.mkdir(mode=0o700, exist_ok=True)
    admin, read = keys / "admin.token", keys / "read.token"
    for path in (admin, read):
        path.write_text(secrets.token_urlsafe(24) + "\n")
        path.chmod(0o600)
    remote = {"listen": f"127.0.0.1:{port}", "token_file": admin, "read_token_file": read,
              "advertise": False}  # fmt: skip
    return remote, read


def rows(ctx: Context, direct: Target, peer: Target, control: int, read_token: Path,
         tiny: str, paced: str) -> list[Result]:  # fmt: skip
    """Added latency and SSE through a front llamad relaying to `peer` (a llamad whose
    control API listens on `control`), against `direct`."""
    port = ctx.port()
    peer_entry = {"name": "peer", "url": f"http://127.0.0.1:{control}", "token_file": read_token}
    front = Daemon(
        ctx,
        "fleet-front",
        {},
        gateway={"listen": f"127.0.0.1:{port}", "fleet": True},
        tables={"fleet": {"peers": [peer_entry]}},
    )
    try:
        front.wait_socket()
        wait_for(lambda: _lists(port, {tiny, paced}), 30.0, "the front llamad listing the peer's")
        base = f"http://127.0.0.1:{port}"
        pids = [front.proc.pid, *peer.pids.get(tiny, [])]
        target = Target(NAME, {tiny: base, paced: base}, {tiny: pids, paced: pids})
        got = peer_rows.latency(ctx, direct, [target], tiny)
        got += peer_rows.sse(ctx, direct, [target], paced)
    finally:
        front.stop()
    note = "client -> llamad -> peer llamad (loopback, [fleet]) -> llama-server; floor: direct"
    for r in got:
        r.note = note
    return got


def _lists(port: int, names: set[str]) -> bool:
    got = http_get(port, "/v1/models", timeout=2.0)
    if got is None or got[0] != 200:
        return False
    return names <= {m["id"] for m in json.loads(got[1])["data"]}
