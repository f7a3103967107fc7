"""nginx as the floor of any proxy, started on 127.0.0.1 in front of the same llama-servers.

Found on PATH or in /usr/sbin (where Debian puts it, off a user's PATH), never installed
by the bench. One `server` per model, since a plain reverse proxy cannot read the model
from the body; one worker process, as the Python peers serve from one process.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from bench.common import Context
from bench.peer_procs import Unavailable, launch
from bench.targets import Target, wait_answering


def find_nginx() -> Path:
    """nginx on PATH or in /usr/sbin (where Debian puts it, off a user's PATH)."""
    found = shutil.which("nginx") or shutil.which("nginx", path="/usr/sbin:/usr/local/sbin")
    if not found:
        raise Unavailable("nginx not found on PATH or in /usr/sbin (Debian: apt-get install nginx)")
    return Path(found)


def start_nginx(ctx: Context, upstreams: dict[str, int]) -> Target:
    """nginx as a plain keep-alive reverse proxy, unbuffered so SSE flows as it comes."""
    binary = find_nginx()
    work, _ = ctx.fresh("nginx")
    ports = {model: ctx.port() for model in upstreams}
    servers = "".join(
        f"""
  upstream u_{i} {{ server 127.0.0.1:{up}; keepalive 64; }}
  server {{
    listen 127.0.0.1:{ports[model]};
    location / {{
      proxy_pass http://u_{i};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 600s;
    }}
  }}"""
        for i, (model, up) in enumerate(upstreams.items())
    )
    user = "user root;" if os.geteuid() == 0 else ""  # workers stay our uid: ps, psutil
    (work / "nginx.conf").write_text(
        f"""{user}
worker_processes 1;
daemon off;
pid {work}/nginx.pid;
error_log {work}/error.log warn;
events {{ worker_connections 4096; }}
http {{
  access_log off;
  client_body_temp_path {work}/body;
  proxy_temp_path {work}/proxy;
  fastcgi_temp_path {work}/fastcgi;
  uwsgi_temp_path {work}/uwsgi;
  scgi_temp_path {work}/scgi;
  keepalive_requests 100000;
{servers}
}}
"""
    )
    popen = launch([binary, "-p", work, "-c", work / "nginx.conf"], work / "nginx.log")
    bases = {m: f"http://127.0.0.1:{p}" for m, p in ports.items()}
    pids = {m: [popen.pid] for m in upstreams}
    target = Target("nginx", bases, pids, children_too=True, popens=[popen])
    try:
        for port in ports.values():
            wait_answering(popen, port, "/health", 30.0, "nginx")
        version = subprocess.run([binary, "-v"], capture_output=True, text=True, timeout=10)
        target.version = version.stderr.strip().rsplit("/", 1)[-1]
    except BaseException:
        target.stop()
        raise
    return target
