"""The hostile neighbours themselves, each in a process of its own so that the legitimate
client's figures (taken in the bench's process) never wait on the attacker's event loop:
`python -m bench.hostile_attack SPEC_JSON`. Every attack is on loopback, bounded in
connections and stops itself after `seconds`.

- `trailer` (N1): chunked POSTs whose trailer is one header line that never ends.
- `peer` (N2): a stand-in fleet peer whose gateway answers with a header line that never
  ends (it runs as long as the daemon), and `ask_peer`: requests for its model.
- `spread` (N4): unfinished heads without a key from 127.0.0.2 to 127.0.0.5, as many
  connections as each address can hold.
- `slow` (N5): clients that ask for a ~4 MB answer and never read it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import socket
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

CHUNK = b"a" * 16384
SPREAD_ADDRESSES = [f"127.0.0.{i}" for i in range(2, 6)]
SPREAD_PER_ADDRESS = 1100  # past the share a 4,096 cap gives one address (1,024)
SLOW_CLIENTS = 4
# /tokenize with pieces: about 23 bytes of answer per character, so about 7 MB: past the
# 4 MB loopback's send buffer takes in (tcp_wmem), so most of it waits in the daemon.
SLOW_CHARS = 300_000
PEER_MODEL = "far"
STALLED_S = 2.0  # a trailer that has not moved on for this long is sent anew
BACKOFF_S = 0.05  # after a refused connection: the attacker's own CPU stays small
# What the attacker saw, printed as JSON when it stops: connections made and failed,
# the most held at once, MB sent, requests the stand-in peer was relayed.
STATS: Counter[str] = Counter()
_open_now = 0


def _head(spec: dict[str, Any], method: str, path: str, extra: str = "") -> bytes:
    key = spec.get("key")
    auth = f"Authorization: Bearer {key}\r\n" if key else ""
    return f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{spec['port']}\r\n{auth}{extra}".encode()


def _json(body: bytes) -> str:
    return f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"


async def _open(port: int, local: str | None = None, rcvbuf: int | None = None) -> Any:
    sock = socket.socket()
    sock.setblocking(False)
    if rcvbuf is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    if local is not None:
        sock.bind((local, 0))
    try:
        await asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port))
    except OSError:
        sock.close()
        raise
    return await asyncio.open_connection(sock=sock)


async def _until(end: float, one: Callable[[], Awaitable[None]]) -> None:
    """Run `one` again and again until `end` (monotonic), never past it."""
    global _open_now
    while (left := end - time.monotonic()) > 0:
        _open_now += 1
        STATS["tries"] += 1
        STATS["most_at_once"] = max(STATS["most_at_once"], _open_now)
        try:
            await asyncio.wait_for(one(), left)
        except (OSError, asyncio.IncompleteReadError, TimeoutError):
            if time.monotonic() < end:  # not the attack's own end
                STATS["failed"] += 1
                await asyncio.sleep(BACKOFF_S)
        finally:
            _open_now -= 1


async def trailer(spec: dict[str, Any], end: float) -> None:
    body = json.dumps({"model": spec["model"], "prompt": "hi", "max_tokens": 1}).encode()
    framing = "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    head = _head(spec, "POST", "/v1/completions", framing)

    async def one() -> None:
        reader, writer = await _open(spec["port"])
        try:
            writer.write(head + b"%x\r\n%s\r\n0\r\nX-Trailer: " % (len(body), body))
            while not reader.at_eof():
                writer.write(CHUNK)
                # A gateway that stopped reading (it answered 401) gets a new connection.
                await asyncio.wait_for(writer.drain(), STALLED_S)
                STATS["kb_sent"] += len(CHUNK) // 1024
        finally:
            writer.close()

    await _until(end, one)


async def peer(spec: dict[str, Any], end: float) -> None:
    """The stand-in peer, for the daemon's whole run: its status document (its peer
    document too) names one model, and every request relayed to its gateway (the same
    port) gets a header line that never ends, for `answer_s` at most."""
    status = json.dumps({
        "daemon": {"pid": 1, "started_at": "stand-in", "config_path": "/stand-in.toml"},
        "gateway": {"listen": f"127.0.0.1:{spec['peer_port']}"},
        "instances": [{"name": PEER_MODEL, "state": "running",
                       "gateway": {"routable": True, "aliases": [], "slots": 4, "in_flight": 0}}],
    }).encode()  # fmt: skip

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith((b"GET /v1/status", b"GET /v1/fleet")):
                    break
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(status), status))  # fmt: skip
                await writer.drain()
            print(head.split(b"\r\n")[0].decode(errors="replace"), file=sys.stderr, flush=True)
            began = time.monotonic()
            stop = min(end, began + float(spec["answer_s"]))
            writer.write(b"HTTP/1.1 200 OK\r\nX-Endless: ")
            while time.monotonic() < stop:
                writer.write(CHUNK)
                await writer.drain()
                STATS["kb_sent"] += len(CHUNK) // 1024
        STATS["relayed"] += 1
        writer.close()
        print(json.dumps(STATS), file=sys.stderr, flush=True)

    server = await asyncio.start_server(answer, "127.0.0.1", spec["peer_port"])
    async with server:
        await asyncio.sleep(end - time.monotonic())


async def ask_peer(spec: dict[str, Any], end: float) -> None:
    """Four clients asking for the stand-in peer's model, again as each request ends."""
    body = json.dumps({"model": PEER_MODEL, "prompt": "hi", "max_tokens": 1}).encode()
    head = _head(spec, "POST", "/v1/completions", _json(body))

    async def ask() -> None:
        reader, writer = await _open(spec["port"])
        try:
            writer.write(head + body)
            answer = await reader.read()
            print(answer.split(b"\r\n")[0].decode(errors="replace"), file=sys.stderr, flush=True)
        finally:
            writer.close()

    await asyncio.gather(*(_until(end, ask) for _ in range(4)))


async def spread(spec: dict[str, Any], end: float) -> None:
    async def hold(local: str) -> None:
        reader, writer = await _open(spec["port"], local)
        try:
            writer.write(_head(spec, "GET", "/v1/models", "X-Slow: "))
            await reader.read()  # until the gateway closes it
        finally:
            writer.close()

    holders = [_until(end, functools.partial(hold, a))
               for a in SPREAD_ADDRESSES for _ in range(SPREAD_PER_ADDRESS)]  # fmt: skip
    await asyncio.gather(*holders)


async def slow(spec: dict[str, Any], end: float) -> None:
    body = json.dumps({"model": spec["model"], "content": "ab" * (SLOW_CHARS // 2),
                       "with_pieces": True}).encode()  # fmt: skip
    head = _head(spec, "POST", "/tokenize", _json(body))

    async def never_read() -> None:
        _, writer = await _open(spec["port"], rcvbuf=4096)
        try:
            writer.write(head + body)
            await writer.drain()
            await asyncio.sleep(end - time.monotonic())
        finally:
            writer.close()

    await asyncio.gather(*(_until(end, never_read) for _ in range(SLOW_CLIENTS)))


async def idle(spec: dict[str, Any], end: float) -> None:
    """No attack: the quiet figures the attacks' rows stand against."""
    await asyncio.sleep(end - time.monotonic())


ATTACKS: dict[str, Callable[[dict[str, Any], float], Coroutine[Any, Any, None]]] = {
    "idle": idle, "trailer": trailer, "peer": peer, "ask_peer": ask_peer, "spread": spread,
    "slow": slow,
}  # fmt: skip


def main() -> None:
    spec = json.loads(sys.argv[1])
    end = time.monotonic() + float(spec["seconds"])
    print("ready", flush=True)
    asyncio.run(ATTACKS[spec["attack"]](spec, end))
    print(json.dumps(STATS), flush=True)


if __name__ == "__main__":
    main()
