"""How llamactl reaches a llamad: the Unix socket, or HTTP(S) to a remote control API.

Standard library only (http.client, ssl), for the same reason as `client.py`; ssl and
dataclasses cost ~12 ms to import, so neither is on the way to a local `status`. Also
says, in words, why a connection failed: the reason, and a hint at what to do about it.
"""

from __future__ import annotations

import errno
import http.client
import os
import socket
from collections.abc import Callable
from pathlib import Path
from urllib.parse import urlsplit

from llamad.common.trust import UntrustedSocket, check_socket_owner

DEFAULT_TIMEOUT = 10.0
LOCAL_NETWORK_HINT = (
    "on macOS 15 or later, Local Network Privacy blocks LAN connections from launchd jobs "
    "and from apps not allowed in System Settings > Privacy & Security > Local Network"
)

Connect = Callable[[float | None], http.client.HTTPConnection]


class UnixHTTPConnection(http.client.HTTPConnection):
    """HTTPConnection whose transport is an AF_UNIX stream socket."""

    def __init__(self, socket_path: Path, timeout: float | None = DEFAULT_TIMEOUT) -> None:
        super().__init__("localhost", timeout=timeout)
        self.socket_path = socket_path

    def connect(self) -> None:
        check_socket_owner(self.socket_path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(os.fspath(self.socket_path))
        except BaseException:
            sock.close()
            raise
        self.sock = sock


class Endpoint:
    """One llamad: how to connect, what to call it in messages, and the path prefix."""

    __slots__ = ("connect", "prefix", "remote", "where")

    def __init__(
        self, where: str, connect: Connect, prefix: str = "", remote: bool = False
    ) -> None:
        self.where, self.connect, self.prefix, self.remote = where, connect, prefix, remote


def unix_endpoint(socket_path: Path) -> Endpoint:
    """The daemon on this machine, through its control socket."""
    return Endpoint(str(socket_path), lambda timeout: UnixHTTPConnection(socket_path, timeout))


def url_endpoint(url: str, ca_file: Path | None = None) -> Endpoint:
    """A remote control API at `url` (http:// or https://, maybe with a path prefix).

    For https, only `ca_file` is trusted when given (e.g. a self-signed certificate),
    else the system's CAs. ValueError for a URL that is not http(s).
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http:// or https:// URL: {url!r}")
    host, port = parts.hostname, parts.port
    prefix = parts.path.rstrip("/")
    if parts.scheme == "http":
        return Endpoint(
            url, lambda t: http.client.HTTPConnection(host, port, timeout=t), prefix, True
        )
    import ssl

    context = ssl.create_default_context(cafile=os.fspath(ca_file) if ca_file else None)

    def https(timeout: float | None) -> http.client.HTTPConnection:
        return http.client.HTTPSConnection(host, port, timeout=timeout, context=context)

    return Endpoint(url, https, prefix, True)


def describe_failure(exc: BaseException, remote: bool, timeout: float | None) -> tuple[str, str]:
    """(reason, hint) for a failed connection or exchange, fit for one terminal line."""
    # Accepted and then dropped unread: what llamad does to a client running as another user.
    if isinstance(exc, http.client.RemoteDisconnected | ConnectionResetError | BrokenPipeError):
        hint = "is it llamad's remote control port?" if remote else "does it run as another user?"
        return "connection closed", hint
    if isinstance(exc, UntrustedSocket):
        return exc.strerror or str(exc), "is another user's llamad (or an impostor) there?"
    if isinstance(exc, TimeoutError):
        return (f"timed out after {timeout:g}s" if timeout else "timed out"), "is it running?"
    verify_message = getattr(exc, "verify_message", None)  # ssl.SSLCertVerificationError
    if isinstance(exc, OSError) and verify_message is not None:
        return str(verify_message) or "certificate not trusted", "trust its CA with ca_file"
    if isinstance(exc, OSError) and exc.errno == errno.EHOSTUNREACH:
        return exc.strerror or "no route to host", LOCAL_NETWORK_HINT
    reason = (exc.strerror if isinstance(exc, OSError) else None) or str(exc)
    hint = "is llamad running there with [daemon.remote]?" if remote else "is it running?"
    return reason or type(exc).__name__, hint
