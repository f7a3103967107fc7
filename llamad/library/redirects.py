"""Where a registry may send a pull: a redirect is followed only to an `https` URL whose
host resolves to public addresses only.

The registry itself is the config's (`ollama_registry`, trusted as written); what it
answers is not. A redirect to loopback, a link-local address (cloud metadata at
169.254.169.254) or a private network would make the daemon GET, on the registry's
word, something only this machine can reach.
"""

from __future__ import annotations

import ipaddress
import socket

import httpx

from llamad.library.progress import PullError


class RedirectRefused(PullError):
    """A registry's redirect to a URL a pull must not follow."""


def check_redirect(response: httpx.Response) -> None:
    """An httpx response hook: raises RedirectRefused when `response` redirects to a URL
    that is not https or whose host is (or resolves to) a non-public address."""
    if not response.has_redirect_location:
        return
    target = response.url.join(response.headers["location"])
    why = _refusal(target)
    if why is not None:
        raise RedirectRefused(f"the registry redirected to {target}, which {why}; not followed")


def _refusal(url: httpx.URL) -> str | None:
    if url.scheme != "https":
        return "is not https"
    try:
        infos = socket.getaddrinfo(url.host, url.port or 443, type=socket.SOCK_STREAM)
    except OSError as exc:
        return f"does not resolve ({exc})"
    for *_, sockaddr in infos:
        address = ipaddress.ip_address(str(sockaddr[0]).split("%", 1)[0])
        if not address.is_global or address.is_multicast:
            return f"is a loopback, link-local or private address ({address})"
    return None
