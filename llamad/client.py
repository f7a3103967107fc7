"""A small stdlib HTTP client for the control socket; llamactl's only way to talk to llamad.

Standard library only: llamactl has to answer in a few tens of milliseconds, and httpx
alone takes longer than that to import.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from llamad import paths

# typing costs llamactl ~3 ms to import, and annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_TIMEOUT = 10.0


class ClientError(Exception):
    """Talking to llamad went wrong; the message is one line fit for a terminal."""


class Unreachable(ClientError):
    """Nothing usable answers on the socket (absent, refused, closed on us, timed out)."""

    def __init__(self, socket_path: Path, reason: str, hint: str = "is it running?") -> None:
        super().__init__(f"cannot reach llamad at {socket_path} ({reason}); {hint}")
        self.socket_path = socket_path
        self.reason = reason


class APIError(ClientError):
    """llamad answered with an error document."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class BadConfig(ClientError):
    """The config file named to find the socket cannot be read."""


def find_socket(socket_arg: str | None = None, config_arg: str | None = None) -> Path:
    """Where llamad listens: --socket, then $LLAMAD_SOCKET, then the config's [daemon], then
    the default. The config is `config_arg`, else the default config file if it exists.
    """
    if socket_arg:
        return Path(socket_arg).expanduser()
    if os.environ.get("LLAMAD_SOCKET"):
        return Path(os.environ["LLAMAD_SOCKET"]).expanduser()
    config = Path(config_arg).expanduser() if config_arg else paths.default_config()
    if not config_arg and not config.is_file():
        return paths.default_socket()
    import tomllib  # paid for only when there is a file to read

    try:
        daemon = tomllib.loads(config.read_text(encoding="utf-8")).get("daemon", {})
    except (OSError, ValueError) as exc:
        if config_arg:
            raise BadConfig(f"cannot read {config}: {exc}") from None
        return paths.default_socket()  # llamad would refuse this file too; try the default
    # Resolved as the daemon resolves them (llamad.spec): relative to the cwd.
    daemon = daemon if isinstance(daemon, dict) else {}
    socket_path, state_dir = daemon.get("socket"), daemon.get("state_dir")
    if socket_path and isinstance(socket_path, str):
        return Path(socket_path).expanduser().absolute()
    if state_dir and isinstance(state_dir, str):
        return Path(state_dir).expanduser().absolute() / "llamad.sock"
    return paths.default_socket()


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTPConnection whose transport is an AF_UNIX stream socket."""

    def __init__(self, socket_path: Path, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = socket_path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(os.fspath(self.socket_path))
        except BaseException:
            sock.close()
            raise
        self.sock = sock


def _unreachable(socket_path: Path, exc: BaseException) -> Unreachable:
    # Accepted and then dropped unread: what llamad does to a client running as another user.
    if isinstance(exc, http.client.RemoteDisconnected | ConnectionResetError | BrokenPipeError):
        return Unreachable(socket_path, "connection closed", "does it run as another user?")
    if isinstance(exc, TimeoutError):
        return Unreachable(socket_path, "timed out")
    reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
    return Unreachable(socket_path, reason or type(exc).__name__)


class Client:
    """Requests to the llamad listening on `socket_path`, one connection per request."""

    def __init__(self, socket_path: Path, timeout: float = DEFAULT_TIMEOUT) -> None:
        self.socket_path = Path(socket_path)
        self.timeout = timeout

    def _send(
        self, method: str, path: str, body: Any, timeout: float | None
    ) -> tuple[UnixHTTPConnection, http.client.HTTPResponse]:
        conn = UnixHTTPConnection(self.socket_path, timeout)
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, path, body=data, headers=headers)
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise _unreachable(self.socket_path, exc) from None

    def request(
        self, method: str, path: str, body: Any = None, timeout: float | None = None
    ) -> tuple[int, Any]:
        """Send one request; returns (HTTP status, parsed JSON body)."""
        conn, resp = self._send(method, path, body, self.timeout if timeout is None else timeout)
        try:
            raw = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise _unreachable(self.socket_path, exc) from None
        finally:
            conn.close()
        try:
            return resp.status, json.loads(raw) if raw else None
        except ValueError:
            raise ClientError(f"llamad sent a malformed reply to {method} {path}") from None

    def call(
        self, method: str, path: str, body: Any = None, timeout: float | None = None
    ) -> dict[str, Any]:
        """Like request(), but a non-2xx answer raises APIError with llamad's message."""
        status, doc = self.request(method, path, body, timeout)
        if not 200 <= status < 300:
            raise _api_error(status, doc)
        if not isinstance(doc, dict):
            raise ClientError(f"llamad sent a malformed reply to {method} {path}")
        return doc

    @contextmanager
    def stream(self, path: str, timeout: float | None = None) -> Iterator[Iterator[bytes]]:
        """GET `path` and yield an iterator over the body's chunks; error replies raise."""
        conn, resp = self._send("GET", path, None, timeout)
        try:
            if resp.status != 200:
                try:
                    doc = json.loads(resp.read() or b"null")
                except (ValueError, OSError, http.client.HTTPException):
                    doc = None
                raise _api_error(resp.status, doc)
            yield _chunks(resp, self.socket_path)
        finally:
            conn.close()


def _chunks(resp: http.client.HTTPResponse, socket_path: Path) -> Iterator[bytes]:
    try:
        while chunk := resp.read1(65536):
            yield chunk
    except (OSError, http.client.HTTPException) as exc:
        raise _unreachable(socket_path, exc) from None


def _api_error(status: int, doc: Any) -> APIError:
    err = doc.get("error") if isinstance(doc, dict) else None
    if isinstance(err, dict):
        return APIError(status, str(err.get("code", "")), str(err.get("message", "")))
    return APIError(status, "http_error", f"llamad answered HTTP {status}")
