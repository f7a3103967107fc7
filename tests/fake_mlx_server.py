#!/usr/bin/env python3
"""A stand-in for mlx_lm.server, for the faults the real one cannot show on demand.

Same argparse flags llamad uses (`--model`, `--host`, `--port`, a few options), `/health`
and a `/v1/completions` that answers one token. Faults are switched on through env vars
(an instance's `env` table):

    FAKE_MLX_WEDGE_AFTER=S  S seconds after start, completions never answer while
                            /health still says 200 (a wedged generation thread)
    FAKE_MLX_DEAD_AFTER=S   S seconds after start, /health answers 503 (the thread died)
    FAKE_MLX_GENERATE_S=S   a completion of more than one token takes S seconds, and
                            completions run one at a time, as mlx_lm.server 0.32 runs
                            them with a draft model: a one-token probe waits its turn

Stdlib only.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

STARTED = time.monotonic()
ONE_AT_A_TIME = threading.Lock()


def after(name: str) -> bool:
    """Whether the fault `name` (seconds after start) is on by now."""
    value = os.environ.get(name, "")
    return bool(value) and time.monotonic() - STARTED >= float(value)


class Handler(BaseHTTPRequestHandler):
    """The routes llamad's probes use."""

    def do_GET(self) -> None:
        """`/health`: 200, or 503 once the thread is 'dead'."""
        dead = after("FAKE_MLX_DEAD_AFTER")
        self._send(503 if dead else 200, {"status": "unavailable" if dead else "ok"})

    def do_POST(self) -> None:
        """`/v1/completions`: one token, or nothing at all once wedged."""
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or "{}")
        if after("FAKE_MLX_WEDGE_AFTER"):
            threading.Event().wait()  # the request hangs like a stream without [DONE]
        generate = os.environ.get("FAKE_MLX_GENERATE_S")
        if generate:
            with ONE_AT_A_TIME:
                if body.get("max_tokens", 1) > 1:
                    time.sleep(float(generate))
        self._send(200, {"object": "text_completion", "choices": [{"index": 0, "text": "x"}]})

    def _send(self, code: int, body: dict[str, object]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: object) -> None:
        print(format % args, file=sys.stderr, flush=True)


def main() -> None:
    """Parse mlx_lm.server-like flags and serve until killed."""
    parser = argparse.ArgumentParser(prog="mlx_lm.server", description="Fake MLX Http Server.")
    parser.add_argument("--model", type=str)
    parser.add_argument("--host", type=str, default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--log-level", choices=["DEBUG", "INFO"], default="INFO")
    parser.add_argument("--trust-remote-code", action="store_true")
    args = parser.parse_args()
    server = ThreadingHTTPServer((args.host, args.port), Handler)
    server.daemon_threads = True
    print(f"Starting httpd at {args.host} on port {args.port}...", file=sys.stderr, flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
