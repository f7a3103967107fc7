#!/usr/bin/env python3
"""A stand-in for llama-server, for the faults the real one cannot show on demand.

Same port and /health contract as llama-server (503 "Loading model", then 200), same
``--host/--port/-c`` args and ``LLAMA_ARG_*`` env, unknown args ignored. Faults are
switched on through env vars so a supervisor config can set them in its ``env`` table:

    FAKE_LOAD_SECONDS=S    /health answers 503 for S seconds after binding, then 200
    FAKE_IGNORE_SIGTERM=1  ignore SIGTERM, like a wedged llama-server
    FAKE_HANG_AFTER=S      S seconds after ready, accept connections but never answer
    FAKE_EXIT_AFTER=S      exit S seconds after start, with FAKE_EXIT_CODE (default 1)
    FAKE_BIND_FAIL=1       print "couldn't bind HTTP server socket", exit 1 at once
    FAKE_CRASH_FILE=path   exit 1 at once if this file exists

Stdlib only: run it as ``python tests/fake_llama_server.py --port 8080``.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

LOADING = {"error": {"code": 503, "message": "Loading model", "type": "unavailable_error"}}
# llama-server answers these while loading; everything else is 503 until ready.
ALWAYS_UP = {"/models", "/v1/models", "/api/tags"}


def log(msg: str) -> None:
    """Write one llama-server-style log line to stderr, flushed so tests see it at once."""
    print(msg, file=sys.stderr, flush=True)


def env_float(name: str) -> float | None:
    """Return env var ``name`` as seconds, or None when unset or empty."""
    value = os.environ.get(name, "")
    return float(value) if value else None


def parse_args(argv: list[str]) -> tuple[str, int, int]:
    """Pick host, port and context size out of llama-server-like args; ignore the rest.

    Hand-rolled because argparse would read an unknown ``-cb`` as ``-c b``.
    """
    opts = {
        "host": os.environ.get("LLAMA_ARG_HOST", "127.0.0.1"),
        "port": os.environ.get("LLAMA_ARG_PORT", "8080"),
        "ctx": os.environ.get("LLAMA_ARG_CTX_SIZE", "4096"),
    }
    names = {"--host": "host", "--port": "port", "-c": "ctx", "--ctx-size": "ctx"}
    it = iter(argv)
    for arg in it:
        flag, eq, value = arg.partition("=")
        if flag in names:
            opts[names[flag]] = value if eq else next(it, opts[names[flag]])
    return opts["host"], int(opts["port"]), int(opts["ctx"])


class Server(ThreadingHTTPServer):
    """The HTTP side: knows when it became ready and when it should start hanging."""

    allow_reuse_address = True  # SO_REUSEADDR, as llama-server's httplib sets it
    daemon_threads = True  # a hung handler must not keep the process from exiting
    n_ctx = 4096
    ready_at = 0.0
    hang_at: float | None = None


class Handler(BaseHTTPRequestHandler):
    """Routes: /health, /v1/health, /props, /completion, /v1/chat/completions, /v1/models;
    404 otherwise."""

    server: Server
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        """Stay quiet: supervisors poll /health often and the log would drown in it."""

    def send_json(self, code: int, body: object) -> None:
        """Send ``body`` as a JSON response with status ``code``."""
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def route(self) -> None:
        """Answer one request the way llama-server would in the current phase."""
        now = time.monotonic()
        if self.server.hang_at is not None and now >= self.server.hang_at:
            # A wedge, not a stop: the socket stays open and the client waits forever.
            threading.Event().wait()
        length = int(self.headers.get("Content-Length") or 0)
        # Read whole, also to keep the connection in sync for the next request.
        body = self.rfile.read(length) if length else b""
        path = self.path.split("?", 1)[0]
        if path in ALWAYS_UP:
            self.send_json(200, {"object": "list", "data": [{"id": "fake", "object": "model"}]})
        elif now < self.server.ready_at:
            self.send_json(503, LOADING)
        elif path in ("/health", "/v1/health"):
            self.send_json(200, {"status": "ok"})
        elif path == "/props":
            self.send_json(200, {"default_generation_settings": {"n_ctx": self.server.n_ctx}})
        elif path in ("/completion", "/completions", "/v1/completions"):
            self.send_json(200, {"content": "ok"})
        elif path == "/v1/chat/completions":
            self.chat(json.loads(body or b"{}"))
        else:
            self.send_json(404, {"error": {"code": 404, "message": "File Not Found"}})

    def chat(self, request: dict[str, Any]) -> None:
        """A chat completion answering "ok", whole or streamed as llama-server streams it."""
        usage = {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        base = {"id": "chatcmpl-fake", "created": int(time.time()), "model": "fake"}
        if not request.get("stream"):
            message = {"role": "assistant", "content": "ok"}
            choice = {"index": 0, "message": message, "finish_reason": "stop"}
            doc = {**base, "object": "chat.completion", "choices": [choice], "usage": usage}
            self.send_json(200, doc)
            return
        deltas = [({"role": "assistant", "content": None}, None), ({"content": "ok"}, None)]
        deltas.append(({}, "stop"))
        chunks = [
            {**base, "object": "chat.completion.chunk",
             "choices": [{"index": 0, "delta": d, "finish_reason": f}]}
            for d, f in deltas
        ]  # fmt: skip
        chunks[-1]["usage"] = usage
        data = b"".join(b"data: " + json.dumps(c).encode() + b"\n\n" for c in chunks)
        data += b"data: [DONE]\n\n"
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = route


def exit_later(seconds: float, code: int, why: str) -> None:
    """Schedule a hard exit, like a crash: no cleanup, whatever the HTTP threads are doing."""

    def fire() -> None:
        log(f"main: {why}, exiting with code {code}")
        os._exit(code)

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    timer.start()


def main(argv: list[str]) -> int:
    """Run the fake server until SIGTERM/SIGINT (exit 0) or a configured fault."""
    if {"--help", "--version", "--list-devices"} & set(argv):
        # llamad reads the option catalogue from --help and the devices from
        # --list-devices: answer as the real binary does.
        real = os.environ.get("FAKE_REAL_SERVER", "")
        if real:
            os.execv(real, [real, *argv])
    host, port, n_ctx = parse_args(argv)
    crash_file = os.environ.get("FAKE_CRASH_FILE", "")
    if crash_file and os.path.exists(crash_file):
        log(f"main: crash file {crash_file} exists, failing to start")
        return 1
    key = os.environ.get("LLAMA_API_KEY", "")
    log(f"main: api key length = {len(key)}")  # the length proves it arrived; never the key
    if os.environ.get("FAKE_BIND_FAIL") == "1":
        log(f"main: couldn't bind HTTP server socket, hostname: {host}, port: {port}")
        return 1

    def on_sigterm(signum: int, frame: object) -> None:
        log(f"main: received signal {signum}, shutting down")
        raise SystemExit(0)  # unwinds serve_forever in the main thread

    if os.environ.get("FAKE_IGNORE_SIGTERM") == "1":
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, on_sigterm)
    signal.signal(signal.SIGINT, on_sigterm)

    try:
        server = Server((host, port), Handler)
    except OSError as exc:  # e.g. the port is taken: same message and code as llama-server
        log(f"main: couldn't bind HTTP server socket, hostname: {host}, port: {port}: {exc}")
        return 1
    port = server.server_address[1]  # the real one when --port 0 asked for any free port
    server.n_ctx = n_ctx
    load = env_float("FAKE_LOAD_SECONDS") or 0.0
    server.ready_at = time.monotonic() + load
    hang = env_float("FAKE_HANG_AFTER")
    server.hang_at = None if hang is None else server.ready_at + hang
    exit_after = env_float("FAKE_EXIT_AFTER")
    if exit_after is not None:
        exit_later(exit_after, int(os.environ.get("FAKE_EXIT_CODE") or 1), "FAKE_EXIT_AFTER")
    log(f"main: server is listening on http://{host}:{port} - starting the main loop")
    log(f"main: loading model (fake, {load:g} s), n_ctx = {n_ctx}")
    announce = threading.Timer(load, log, ["main: model loaded"])
    announce.daemon = True
    announce.start()
    try:
        server.serve_forever(poll_interval=0.05)
    finally:
        server.server_close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
