"""Browsers are held off: a page on another origin cannot use the gateway, and a name
rebound to this machine (DNS rebinding) is not answered.

A cross-origin `text/plain` POST needs no CORS preflight, so refusing to answer it is
not enough when the request itself does the harm (it starts a model, it generates); and
llama-server reflects any `Origin` back, which let every page read the answers. The door
(`access/door.py`) refuses a request carrying an `Origin` that is neither configured
(`allowed_origins`) nor the gateway's own, before any route, whatever its method or
content type, and answers CORS itself (`access/cors.py`).

`Host` must name this listener: its own address (any loopback form on loopback, with
its port), this machine's name, or one of `allowed_hosts`. A rebinding page's requests
carry the attacker's name, so they stop here even on a keyless gateway. A request with
no `Host` (HTTP/1.0) comes from no browser and passes; the listener has refused one with
two, whatever they name (a proxy in front may read the other). Both checks are header
lookups: no body is read.

On a loopback listener, as Ollama does, any name under `.localhost`, `.local` or
`.internal` (with the listener's port) is taken too: the names apps reach this machine
by, such as Docker's `host.docker.internal` (Open WebUI in a container) and a Mac's
Bonjour name. A rebinding attack needs a name whose DNS the attacker answers, and no
stranger answers for these: `.localhost` resolves to loopback by rule (RFC 6761), never
through DNS; `.internal` is reserved for private networks and never delegated in the
public DNS (ICANN, 2024), so only this machine (`/etc/hosts`, Docker) or its own
network's resolver names it; `.local` is multicast DNS, answered only on the local link
(RFC 6762). What remains is a neighbour on the same link announcing a `.local` name,
the risk Ollama takes too; a keyed gateway still asks that page for a key it cannot
read. Beyond loopback these names are not taken: a listener on a LAN or tailnet address
is one a neighbour could not otherwise reach, and such names go in `allowed_hosts`.
"""

from __future__ import annotations

from llamad.common.hosts import is_loopback
from llamad.config.gateway_table import GatewayConfig

_LOOPBACK_NAMES = ("localhost",)
# Names under these suffixes no stranger's DNS answers for (see above): taken on loopback.
_RESERVED_SUFFIXES = (".localhost", ".local", ".internal")
# Names under these suffixes cannot be pointed at us by a stranger's DNS: mDNS on the
# local link, and Tailscale's MagicDNS for this tailnet.
_OWN_SUFFIXES = (".local", ".ts.net")


class Policy:
    """Who may call, from one `[gateway]`'s lists and this machine's name."""

    def __init__(self, settings: GatewayConfig, hostname: str) -> None:
        self.origins = settings.allowed_origins
        self.hosts = settings.allowed_hosts
        self.hostname = hostname.lower().split(".")[0]
        self._seen: dict[tuple[bytes, str, int], bool] = {}

    def host_ok(self, host: bytes, server: tuple[str, int] | None) -> bool:
        """`host` (the header) names this listener, reached at `server`."""
        if "*" in self.hosts:
            return True
        key = (host, *(server or ("", 0)))
        known = self._seen.get(key)
        if known is None:
            known = self._host_ok(host.decode("latin-1").lower(), server)
            if len(self._seen) > 256:  # bounded: a client may send any names it likes
                self._seen.clear()
            self._seen[key] = known
        return known

    def _host_ok(self, host: str, server: tuple[str, int] | None) -> bool:
        name, port = _split(host)
        if name in self.hosts:
            return True  # a configured name, at whatever port a proxy in front uses
        local, local_port = server or ("", 0)
        local = local.lower().removeprefix("::ffff:")  # an IPv4 client on an IPv6 socket
        if port != local_port:
            return False
        if name in (local, self.hostname) or self._own_name(name):
            return True
        if not is_loopback(local):
            return False
        return is_loopback(name) or name in _LOOPBACK_NAMES or name.endswith(_RESERVED_SUFFIXES)

    def _own_name(self, name: str) -> bool:
        # This machine under a suffix only our own resolvers answer for.
        first, _, rest = name.partition(".")
        return first == self.hostname and any(("." + rest).endswith(s) for s in _OWN_SUFFIXES)

    def origin_ok(self, origin: bytes, host: bytes | None) -> bool:
        """`origin` is allowed: configured, or the gateway's own (same origin)."""
        text = origin.decode("latin-1").lower().rstrip("/")
        if "*" in self.origins or text in self.origins:
            return True
        if host is None:
            return False
        own = host.decode("latin-1").lower()
        return text in (f"http://{own}", f"https://{own}")


def _split(host: str) -> tuple[str, int]:
    """`name:port` -> (name, port); IPv6 in brackets; port 80 when none is given."""
    name, port = host, ""
    if host.startswith("["):
        name, _, rest = host[1:].partition("]")
        port = rest.removeprefix(":")
    elif host.count(":") == 1:
        name, _, port = host.partition(":")
    # ASCII digits only: "²" is a digit to str.isdigit, not to int().
    return name, int(port) if port.isascii() and port.isdigit() else 80
