"""Stand-in fleet peers for the polls bench: one process answering on many loopback
ports as many llamads' control APIs would, with status documents of a real one's shape
and size (a daemon with four instances behind its gateway: about 5 KB).

`python -m bench.status_stand_in COUNTS_PORT PORT...`: `GET /v1/status` is the whole
document, which changes at every ask (uptimes, CPU, probes), as a real one does;
`GET /v1/fleet` is what the fleet reads of it, with an ETag, and 304 to a matching
`If-None-Match`. `GET /counts` on COUNTS_PORT says how many requests and bytes the
peers have seen, so the bench reads them without counting itself.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import sys
import time
from typing import Any

INSTANCES = ("chat", "code", "embed", "shared")
counts = {"requests": 0, "bytes_in": 0, "bytes_out": 0, "not_modified": 0}


RESTORES = dict.fromkeys(("restores", "hits", "misses", "tokens_saved"), 0)
PROMPT_CACHE = {
    "kept": True,
    "note": None,
    "full_window_bytes": None,
    "restores": RESTORES
    | dict.fromkeys(("restore_ms_p50", "restore_ms_p95", "stopped", "recurrent")),
}


def _instance(peer: int, name: str, t: float) -> dict[str, Any]:
    full = name if name == "shared" else f"p{peer}-{name}"
    return {
        "name": full,
        "state": "running",
        "pid": 200000 + peer * 8 + INSTANCES.index(name),
        "host": "127.0.0.1",
        "port": 20000 + peer * 8 + INSTANCES.index(name),
        "model": f"/var/lib/llamad/models/{full}-Q4_K_M.gguf",
        "restarts": 0,
        "uptime_s": round(t, 3),
        "health": {"ok": True, "status": 200, "latency_ms": 0.77, "checked_at": f"{t:.3f}"},
        "last_exit": None,
        "error": None,
        "rss_bytes": 28274688 + int(t * 1000) % 4096,
        "cpu_percent": round(t % 1, 1),
        "prompt_cache": PROMPT_CACHE,
        "chat_template": "the model's own",
        "gateway": _gateway_of(name),
    }


def _gateway_of(name: str) -> dict[str, Any]:
    return {
        "routable": True, "aliases": ["default"] if name == "chat" else [],
        "on_demand": name == "embed", "idle_timeout_s": None, "idle_left_s": None,
        "in_flight": 0, "queued": 0, "slots": 4, "server": None, "relayed": {},
        "estimate_bytes": 601504, "footprint_bytes": 5148672, "devices": {"RAM": 5148672},
        "placed": None, "load_progress": None, "pinned": False, "group": None,
        "exclusive": None,
    }  # fmt: skip


def _daemon(peer: int, t: float) -> dict[str, Any]:
    return {
        "pid": 100000 + peer, "version": "0.1.0", "config_path": f"/etc/llamad/{peer}.toml",
        "config_error": None, "draining": False, "started_at": "2026-12-06T12:00:00.000Z",
        "uptime_s": round(t, 3), "llama_server": "/usr/local/bin/llama-server",
        "llama_server_version": "version: 7068 (e1fcf8b09)", "backends": {},
    }  # fmt: skip


GATEWAY = {
    "max_loaded": 0, "memory_budget": "auto", "budget_bytes": 21791068160,
    "used_bytes": 10379264, "left_bytes": 21780688896, "devices": [], "keys": {},
    "recent_stops": [], "groups": {}, "exclusive": {}, "names": {},
}  # fmt: skip


def status(peer: int) -> bytes:
    """The whole document, as `GET /v1/status` gives it now."""
    t = time.monotonic()
    doc = {
        "daemon": _daemon(peer, t),
        "instances": [_instance(peer, n, t) for n in INSTANCES],
        "gateway": {"listen": f"127.0.0.1:{30000 + peer}", **GATEWAY},
    }
    return json.dumps(doc).encode()


def fleet(peer: int) -> bytes:
    """What the fleet reads: the same every time while nothing changes."""
    daemon = _daemon(peer, 0.0)
    doc = {
        "daemon": {k: daemon[k] for k in ("pid", "started_at", "config_path", "version")},
        "instances": [
            {"name": i["name"], "state": i["state"], "gateway": i["gateway"]}
            for i in (_instance(peer, n, 0.0) for n in INSTANCES)
        ],
        "gateway": {
            "listen": f"127.0.0.1:{30000 + peer}",
            "left_bytes": GATEWAY["left_bytes"],
            "devices": [],
        },
    }
    return json.dumps(doc).encode()


class Peer(asyncio.Protocol):
    """One connection to stand-in peer `peer` (keep-alive, one request at a time)."""

    def __init__(self, peer: int | None) -> None:
        self.peer, self.buf = peer, b""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buf += data
        while b"\r\n\r\n" in self.buf:
            head, self.buf = self.buf.split(b"\r\n\r\n", 1)
            self._answer(head)

    def _answer(self, head: bytes) -> None:
        lines = head.decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        headers = {
            k.strip().lower(): v.strip() for k, _, v in (x.partition(":") for x in lines[1:])
        }
        if self.peer is None:
            body, status, extra = json.dumps(counts).encode(), "200 OK", ""
        else:
            counts["requests"] += 1
            counts["bytes_in"] += len(head) + 4
            body, status, extra = self._document(path, headers.get("if-none-match"))
        answer = (
            f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\n{extra}\r\n"
        ).encode() + body
        if self.peer is not None:
            counts["bytes_out"] += len(answer)
        self.transport.write(answer)

    def _document(self, path: str, tag: str | None) -> tuple[bytes, str, str]:
        assert self.peer is not None
        if path.startswith("/v1/fleet"):
            body = fleet(self.peer)
            etag = '"' + hashlib.blake2b(body, digest_size=12).hexdigest() + '"'
            if tag == etag:
                counts["not_modified"] += 1
                return b"", "304 Not Modified", f"etag: {etag}\r\n"
            return body, "200 OK", f"etag: {etag}\r\n"
        if path.startswith("/v1/status"):
            return status(self.peer), "200 OK", ""
        return b'{"error": "not found"}', "404 Not Found", ""


async def main(counts_port: int, ports: list[int]) -> None:
    loop = asyncio.get_running_loop()
    servers = [await loop.create_server(lambda: Peer(None), "127.0.0.1", counts_port)]
    for i, port in enumerate(ports):
        servers.append(
            await loop.create_server(lambda i=i: Peer(i), "127.0.0.1", port)  # type: ignore[misc]
        )
    print("ready", flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]), [int(p) for p in sys.argv[2:]]))
