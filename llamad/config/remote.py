"""`[daemon.remote]` resolved: where the TCP control API listens and the tokens it takes.

Everything is checked when the config is loaded, so `llamad` refuses a group-readable
token file or a broken certificate with one line and exit 2, before anything starts.
"""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from llamad.common.hosts import is_loopback
from llamad.common.paths import anchored
from llamad.common.tokenfile import MIN_TOKEN_CHARS, TokenFileError, check_private, read_token
from llamad.config.fleet_tables import RemoteSettings, split_listen
from llamad.config.tomlpos import where_is

Problem = Callable[[str, str], None]  # (key under daemon.remote, message)


@dataclass(frozen=True)
class Remote:
    """The control API on TCP. Tokens stay out of repr(): daemon logs show dataclasses."""

    host: str
    port: int
    admin_token: str = field(repr=False)
    read_token: str | None = field(default=None, repr=False)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    advertise: bool = True

    @property
    def tls(self) -> bool:
        """Whether the API is served over HTTPS."""
        return self.tls_cert is not None

    @property
    def loopback(self) -> bool:
        """Whether only this machine can connect (then mDNS stays on loopback too)."""
        return is_loopback(self.host)


def resolve_remote(
    settings: RemoteSettings | None, path: Path, text: str, problems: list[str]
) -> Remote | None:
    """`[daemon.remote]` made ready to serve; problems are appended as one line each."""
    if settings is None:
        return None
    before = len(problems)

    def problem(key: str, msg: str) -> None:
        where = where_is(path, text, ("daemon", "remote", key))
        problems.append(f"{where}: daemon.remote.{key}: {msg}")

    def token(key: str, value: str) -> str | None:
        try:
            return read_token(anchored(value, path.parent), MIN_TOKEN_CHARS)
        except TokenFileError as exc:
            problem(key, str(exc))
            return None

    host, port = split_listen(settings.listen)  # already validated by the model
    admin = token("token_file", settings.token_file)
    read = token("read_token_file", settings.read_token_file) if settings.read_token_file else None
    if admin is not None and admin == read:
        problem("read_token_file", "holds the admin token; a read-only token must differ")
    cert = anchored(settings.tls_cert, path.parent) if settings.tls_cert else None
    key = anchored(settings.tls_key, path.parent) if settings.tls_key else None
    if cert is not None and key is not None:
        _check_tls(cert, key, problem)
    if len(problems) > before or admin is None:
        return None
    return Remote(host, port, admin, read, cert, key, settings.advertise)


def _check_tls(cert: Path, key: Path, problem: Problem) -> None:
    try:
        check_private(key)  # a private key others can read is as leaked as a token
    except TokenFileError as exc:
        problem("tls_key", str(exc))
        return
    try:
        # What the listener will do at startup; failing here gives a config line, not a crash.
        ssl.create_default_context(ssl.Purpose.CLIENT_AUTH).load_cert_chain(cert, key)
    except (OSError, ssl.SSLError) as exc:
        problem("tls_cert", f"cannot load {cert} with {key}: {exc}")
