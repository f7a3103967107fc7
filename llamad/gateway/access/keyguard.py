"""Guessing the gateway's key is slow: wrong keys are counted per client address, and an
address with too many in the window is answered 429 whatever it sends, until it passes.

As the remote control API (`api/auth.py`): 10 wrong keys in 60 s. A 2-character key fell
in a quarter of a second at about 2,600 guesses a second; at 10 a minute, a 16-character
key (the minimum) outlasts everyone. Only a key that was given and is wrong counts: an
app that asks `GET /api/version` with no key is not guessing. The count is per address
as the listener sees it (an IPv6 client's /64, which one host usually holds), never a
forwarded header, and nothing of the key is logged.
"""

from __future__ import annotations

import structlog
from starlette.types import Scope

from llamad.common.hosts import client_key
from llamad.common.ratelimit import RateLimiter

log = structlog.get_logger("llamad.gateway")


class KeyGuard:
    """Counts the gateway's failed key checks and says who must wait."""

    def __init__(self, limiter: RateLimiter | None = None) -> None:
        # An empty limiter has length 0, so it is false: only None means "none given".
        self.limiter = RateLimiter() if limiter is None else limiter

    def blocked(self, scope: Scope) -> float | None:
        """Seconds the client of `scope` must wait, or None when it may try."""
        if not len(self.limiter):
            return None  # the common case costs one length check
        return self.limiter.retry_after(_client(scope))

    def failed(self, scope: Scope, given: bool) -> None:
        """A request without a valid key: count it when a key was `given` (a guess)."""
        client = _client(scope)
        if not given:
            log.debug("gateway.unauthorized", client=client, reason="no_key")
        elif self.limiter.fail(client):
            log.warning("gateway.client_blocked", client=client, window_s=self.limiter.window_s)
        else:
            log.info("gateway.unauthorized", client=client, reason="wrong_key")


def _client(scope: Scope) -> str:
    peer = scope.get("client")
    return client_key(peer[0] if peer else None) or "?"
