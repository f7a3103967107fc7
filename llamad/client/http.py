"""A small stdlib HTTP client for the control API; llamactl's only way to talk to llamad.

The same client speaks to the local daemon over its Unix socket, or to a remote one over
HTTP(S) with a bearer token. Standard library only: llamactl has to answer in a few tens
of milliseconds, and httpx alone takes longer than that to import.
"""

from __future__ import annotations

import http.client
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from llamad.client.transport import (
    DEFAULT_TIMEOUT,
    Endpoint,
    describe_failure,
    unix_endpoint,
    url_endpoint,
)
from llamad.common import paths

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


class ClientError(Exception):
    """Talking to llamad went wrong; the message is one line fit for a terminal."""


class Unreachable(ClientError):
    """Nothing usable answers there (absent, refused, closed on us, timed out, no route)."""

    def __init__(self, socket_path: Path | str, reason: str, hint: str = "is it running?") -> None:
        super().__init__(f"cannot reach llamad at {socket_path} ({reason}); {hint}")
        self.socket_path = socket_path  # or the URL, for a remote llamad
        self.reason, self.hint = reason, hint


class APIError(ClientError):
    """llamad answered with an error document."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


class AuthError(APIError):
    """A remote llamad refused the token: missing or wrong, read-only, or rate-limited."""


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
        return _default_or_demo()
    import tomllib  # paid for only when there is a file to read

    try:
        daemon = tomllib.loads(config.read_text(encoding="utf-8")).get("daemon", {})
    except (OSError, ValueError) as exc:
        if config_arg:
            raise BadConfig(f"cannot read {config}: {exc}") from None
        return paths.default_socket()  # llamad would refuse this file too; try the default
    # Resolved as the daemon resolves them (config.load): relative to the file's directory.
    daemon = daemon if isinstance(daemon, dict) else {}
    socket_path, state_dir = daemon.get("socket"), daemon.get("state_dir")
    base = config.absolute().parent
    if socket_path and isinstance(socket_path, str):
        return paths.anchored(socket_path, base)
    if state_dir and isinstance(state_dir, str):
        return paths.anchored(state_dir, base) / "llamad.sock"
    return paths.default_socket()


def _default_or_demo() -> Path:
    """The default socket; the demo's when only `llamad --demo` is running."""
    default = paths.default_socket()
    demo = paths.demo_state() / "llamad.sock"
    return demo if not default.exists() and demo.exists() else default


class Client:
    """Requests to one llamad, one connection per request: at `socket_path`, or at `url`
    with `token` (and `ca_file` to trust for https)."""

    def __init__(
        self,
        socket_path: Path | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        *,
        url: str | None = None,
        token: str | None = None,
        ca_file: Path | None = None,
    ) -> None:
        self.socket_path = Path(socket_path) if socket_path is not None else None
        self.endpoint: Endpoint
        if url is not None and self.socket_path is None:
            self.endpoint = url_endpoint(url, ca_file)  # ValueError for a bad URL
        elif self.socket_path is not None and url is None:
            self.endpoint = unix_endpoint(self.socket_path)
        else:
            raise TypeError("Client takes a socket_path or a url, not both")
        self.timeout, self._token = timeout, token

    @property
    def where(self) -> str:
        """The socket path or URL, as messages name it."""
        return self.endpoint.where

    def _unreachable(self, exc: BaseException, timeout: float | None) -> Unreachable:
        reason, hint = describe_failure(exc, self.endpoint.remote, timeout)
        return Unreachable(self.where, reason, hint)

    def _send(
        self, method: str, path: str, body: Any, timeout: float | None
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn = self.endpoint.connect(timeout)
        headers = {"Accept": "application/json"}
        if self._token:
            headers["Authorization"] = f"Bearer {self._token}"
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            conn.request(method, self.endpoint.prefix + path, body=data, headers=headers)
            return conn, conn.getresponse()
        except (OSError, http.client.HTTPException) as exc:
            conn.close()
            raise self._unreachable(exc, timeout) from None

    def request(
        self, method: str, path: str, body: Any = None, timeout: float | None = None
    ) -> tuple[int, Any]:
        """Send one request; returns (HTTP status, parsed JSON body)."""
        timeout = self.timeout if timeout is None else timeout
        conn, resp = self._send(method, path, body, timeout)
        try:
            raw = resp.read()
        except (OSError, http.client.HTTPException) as exc:
            raise self._unreachable(exc, timeout) from None
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
            raise _api_error(status, doc, self.where, bool(self._token))
        if not isinstance(doc, dict):
            raise ClientError(f"llamad sent a malformed reply to {method} {path}")
        return doc

    @contextmanager
    def stream(
        self, path: str, timeout: float | None = None, method: str = "GET", body: Any = None
    ) -> Iterator[Iterator[bytes]]:
        """Request `path` and yield an iterator over the body's chunks; error replies raise."""
        conn, resp = self._send(method, path, body, timeout)
        try:
            if resp.status != 200:
                try:
                    doc = json.loads(resp.read() or b"null")
                except (ValueError, OSError, http.client.HTTPException):
                    doc = None
                raise _api_error(resp.status, doc, self.where, bool(self._token))
            yield self._chunks(resp, timeout)
        finally:
            conn.close()

    def _chunks(self, resp: http.client.HTTPResponse, timeout: float | None) -> Iterator[bytes]:
        try:
            while chunk := resp.read1(65536):
                yield chunk
        except (OSError, http.client.HTTPException) as exc:
            raise self._unreachable(exc, timeout) from None


_AUTH_MESSAGES = {
    401: "{where} refused the token (unauthorized): {why}",
    403: "{where} took the token as read-only (forbidden): use the admin token",
    429: "{where} refuses this address for a while after too many failed tokens (rate limited)",
}


def _api_error(status: int, doc: Any, where: str, has_token: bool) -> APIError:
    err = doc.get("error") if isinstance(doc, dict) else None
    if status in _AUTH_MESSAGES:
        why = "check the token file" if has_token else "set the peer's token_file or --token-file"
        code = str(err.get("code", status)) if isinstance(err, dict) else str(status)
        return AuthError(status, code, _AUTH_MESSAGES[status].format(where=where, why=why))
    if isinstance(err, dict):
        return APIError(status, str(err.get("code", "")), str(err.get("message", "")))
    return APIError(status, "http_error", f"llamad answered HTTP {status}")
