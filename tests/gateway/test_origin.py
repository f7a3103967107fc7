"""No web page drives the gateway (issue #30): a foreign Origin is refused whatever the
content type, the gateway answers CORS itself, and a Host that is not this listener's
(DNS rebinding) is refused. Against a real llamad, llama-server and headless Chromium;
a Host whose port is not ASCII digits is refused 403 by the door itself, in process."""

from __future__ import annotations

import http.server
import shutil
import subprocess
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from door_helpers import ask, build
from gateway_helpers import TINY, Gw, chat, gateway

from llamad.config.gateway_table import GatewayConfig
from llamad.gateway.access.origin import Policy

PORT = 8080


def policy(**settings: object) -> Policy:
    return Policy(GatewayConfig(host="127.0.0.1", port=PORT, **settings), "studio")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("host", "server", "ok"),
    [
        ("127.0.0.1:8080", "127.0.0.1", True),
        ("localhost:8080", "127.0.0.1", True),
        ("[::1]:8080", "::1", True),
        ("[::1]:8080", "127.0.0.1", True),
        ("LOCALHOST:8080", "127.0.0.1", True),
        ("evil.test:8080", "127.0.0.1", False),  # a name rebound to us
        ("127.0.0.1:9999", "127.0.0.1", False),  # another port
        ("localhost", "127.0.0.1", False),  # port 80
        ("192.168.1.20:8080", "192.168.1.20", True),  # a LAN bind, by its address
        ("192.168.1.20:8080", "::ffff:192.168.1.20", True),
        ("localhost:8080", "192.168.1.20", False),  # loopback names only on loopback
        ("studio.local:8080", "192.168.1.20", True),
        ("studio.tail1234.ts.net:8080", "100.64.0.2", True),
        ("studio:8080", "192.168.1.20", True),
        ("studio.evil.test:8080", "192.168.1.20", False),
    ],
)
def test_host_must_name_this_listener(host: str, server: str, ok: bool) -> None:
    assert policy().host_ok(host.encode(), (server, PORT)) is ok


# The Host each app sends, to a gateway on loopback at PORT on the machine "studio".
@pytest.mark.parametrize(
    ("host", "ok"),
    [
        ("host.docker.internal:8080", True),  # Open WebUI in Docker Desktop
        ("gateway.docker.internal:8080", True),
        ("mymac.local:8080", True),  # a Bonjour name that is not the hostname
        ("studio.local:8080", True),
        ("studio:8080", True),  # the hostname
        ("STUDIO:8080", True),
        ("foo.localhost:8080", True),
        ("studio.tail1234.ts.net:8080", True),  # this machine's tailnet name
        ("other.tail1234.ts.net:8080", False),  # another machine's
        ("host.docker.internal:9999", False),  # another port
        ("evil.example:8080", False),  # a public name: rebinding
        ("localhost.evil.example:8080", False),
        ("internal:8080", False),
        ("evil.example.local.evil.example:8080", False),
    ],
)
def test_the_names_local_apps_use_are_taken_on_loopback(host: str, ok: bool) -> None:
    assert policy().host_ok(host.encode(), ("127.0.0.1", PORT)) is ok
    assert policy().host_ok(host.encode(), ("::1", PORT)) is ok


@pytest.mark.parametrize(
    "host", ["host.docker.internal:8080", "mymac.local:8080", "foo.localhost:8080"]
)
def test_reserved_names_are_not_taken_beyond_loopback(host: str) -> None:
    """A LAN or tailnet listener is one a neighbour could not otherwise reach."""
    assert policy().host_ok(host.encode(), ("192.168.1.20", PORT)) is False
    assert policy().host_ok(host.encode(), ("100.64.0.2", PORT)) is False


def test_configured_hosts_and_origins() -> None:
    p = policy(allowed_hosts=frozenset({"llm.example.org"}), allowed_origins=frozenset({"app://x"}))
    assert p.host_ok(b"llm.example.org", ("127.0.0.1", PORT))  # any port: a proxy in front
    assert not p.host_ok(b"other.example.org:8080", ("127.0.0.1", PORT))
    assert p.origin_ok(b"app://x", None)
    assert p.origin_ok(b"http://127.0.0.1:8080", b"127.0.0.1:8080")  # same origin
    assert not p.origin_ok(b"http://evil.test", b"127.0.0.1:8080")
    assert not p.origin_ok(b"null", b"127.0.0.1:8080")
    anyone = policy(allowed_hosts=frozenset({"*"}), allowed_origins=frozenset({"*"}))
    assert anyone.host_ok(b"evil.test", ("127.0.0.1", PORT))
    assert anyone.origin_ok(b"http://evil.test", None)


# A port of non-ASCII digits: "²" (latin-1 0xb2) is a digit to str.isdigit but not to int().
ODD_PORTS = [b"127.0.0.1:\xb2", b"[::1]:\xb2", b"127.0.0.1:8\xb9"]


@pytest.mark.parametrize("host", ODD_PORTS)
def test_a_port_of_non_ascii_digits_names_no_listener(host: bytes) -> None:
    assert policy().host_ok(host, ("127.0.0.1", PORT)) is False


@pytest.mark.parametrize("host", ODD_PORTS)
async def test_a_port_of_non_ascii_digits_is_refused_403_not_500(
    host: bytes, tmp_path: Path
) -> None:
    """At the door, which a ValueError from its Host check would turn into a 500."""
    app = build(tmp_path, keys=())
    refused = await ask(app.door, "POST", "/v1/chat/completions", {"model": "a"}, [(b"host", host)])
    assert refused.status == 403
    assert refused.json()["error"]["code"] == "host_not_allowed"
    assert app.double.commands == []


@pytest.fixture
def gw(tiny_model: Path) -> Iterator[Gw]:
    instances = {"a": TINY, "lazy": {**TINY, "on_demand": True}}
    with gateway(tiny_model, instances, allowed_origins=["http://ui.test:3000"]) as g:
        yield g


def test_foreign_origins_and_hosts_are_refused(gw: Gw) -> None:
    """A text/plain POST from a foreign page is refused before it starts anything, in each
    family's shape; an allowed origin gets the gateway's own CORS headers, once."""
    url = f"{gw.base}/v1/chat/completions"
    foreign = {"Origin": "http://evil.test", "Content-Type": "text/plain"}
    body = httpx.Request("POST", url, json=chat("lazy")).content
    refused = httpx.post(url, content=body, headers=foreign, timeout=10)
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "origin_not_allowed"
    assert "access-control-allow-origin" not in refused.headers
    ollama = {"model": "lazy", "messages": [{"role": "user", "content": "hi"}], "stream": False}
    api = httpx.post(f"{gw.base}/api/chat", json=ollama, headers=foreign, timeout=10)
    assert api.status_code == 403
    assert isinstance(api.json()["error"], str)
    assert gw.starts("lazy") == 0  # nothing was loaded for them

    ui = {"Origin": "http://ui.test:3000"}
    ok = httpx.post(url, json=chat("a"), headers=ui, timeout=30)
    assert ok.status_code == 200
    assert ok.headers.get_list("access-control-allow-origin") == ["http://ui.test:3000"]
    asked = {**ui, "Access-Control-Request-Method": "POST"}
    pre = httpx.options(url, headers={**asked, "Access-Control-Request-Headers": "authorization"})
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-headers"] == "authorization"
    bad_pre = httpx.options(url, headers={**asked, "Origin": "http://evil.test"})
    assert bad_pre.status_code == 403
    port = gw.base.rsplit(":", 1)[1]
    same = httpx.get(f"{gw.base}/v1/models", headers={"Origin": gw.base}, timeout=10)
    assert same.status_code == 200

    for good in (f"localhost:{port}", f"127.0.0.1:{port}", f"host.docker.internal:{port}"):
        assert httpx.get(f"{gw.base}/v1/models", headers={"Host": good}).status_code == 200
    for bad in (f"evil.test:{port}", "127.0.0.1:1"):
        rebound = httpx.get(f"{gw.base}/api/tags", headers={"Host": bad})
        assert rebound.status_code == 403
        assert "not served" in rebound.json()["error"]
    assert gw.ld.events("connection.refused", reason="host_not_allowed")


@contextmanager
def page(html: str) -> Iterator[int]:
    """Serve `html` at / on a free loopback port (another origin than the gateway's)."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            data = html.encode()
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def chromium(url: str, mapped: str) -> str:
    """The DOM of `url` in headless Chromium, `mapped` resolving to 127.0.0.1."""
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        pytest.skip("no chromium here")
    argv = [
        exe, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
        f"--host-resolver-rules=MAP {mapped} 127.0.0.1", "--virtual-time-budget=10000",
        "--dump-dom", url,
    ]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, timeout=45, check=False)
    return done.stdout


@pytest.mark.timeout(120)
def test_a_page_in_chromium_cannot_read_the_keyless_gateway(gw: Gw) -> None:
    """A page on another origin posts text/plain (no preflight) and cannot read the answer;
    a page at a rebound name cannot read the gateway's own answers either."""
    script = f"""<html><head><title>pending</title></head><body><script>
    fetch("{gw.base}/v1/chat/completions", {{method: "POST", headers: {{"Content-Type":
      "text/plain"}}, body: JSON.stringify({{model: "a", messages: [{{role: "user",
      content: "hi"}}], max_tokens: 2}})}})
      .then(r => r.text()).then(t => document.title = "READ " + t)
      .catch(e => document.title = "BLOCKED");
    </script></body></html>"""
    with page(script) as port:
        dom = chromium(f"http://evil.test:{port}/", "evil.test")
    assert "<title>BLOCKED</title>" in dom, dom[:500]
    gw_port = gw.base.rsplit(":", 1)[1]
    rebound = chromium(f"http://rebind.test:{gw_port}/v1/models", "rebind.test")
    assert "not served" in rebound, rebound[:500]
    assert '"a"' not in rebound
    assert gw.ld.events("connection.refused", reason="origin_not_allowed")
