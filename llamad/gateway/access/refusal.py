"""How the door says no: a status, a code and a message, in the family shape of the
path asked for (`contract/families.py`), with Retry-After or headers of its own when it has them."""

from __future__ import annotations

from starlette.types import Send

from llamad.gateway.contract.shapes import refuse


class Refusal(Exception):
    """A request the door refuses; `code` is also the refusals metric's reason, and
    `model` the model it was refused for, when it named one the door looked up."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        retry_after: float | None = None,
        headers: list[tuple[bytes, bytes]] | None = None,
        model: str = "",
    ) -> None:
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.retry_after, self.headers, self.model = retry_after, headers, model

    async def answer(self, send: Send, path: str) -> None:
        """Answer it in `path`'s family shape."""
        await refuse(
            send, path, self.status, self.code, self.message, self.retry_after, self.headers
        )


def bad(message: str) -> Refusal:
    """400: the request itself is wrong."""
    return Refusal(400, "invalid_request", message)


def too_large(cap: int) -> Refusal:
    """413: the body is past `cap` bytes; the connection closes after the answer."""
    message = f"the request body is over the limit of {cap} bytes"
    return Refusal(413, "body_too_large", message, headers=[(b"connection", b"close")])
