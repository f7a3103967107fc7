"""Errors that cross the control API, each with its HTTP status and stable code."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from starlette.responses import JSONResponse


class ControlError(Exception):
    """A request the daemon refuses; rendered as {"error": {"code", "message"}}."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class UnknownInstance(ControlError):
    """No instance has that name."""

    status = 404
    code = "unknown_instance"

    def __init__(self, name: str) -> None:
        super().__init__(f"no instance named {name!r}")


class Conflict(ControlError):
    """The request clashes with what the daemon is doing (e.g. the instance is being removed)."""

    status = 409
    code = "conflict"


class InvalidConfig(ControlError):
    """A reload found the config file invalid; nothing was changed."""

    status = 422
    code = "invalid_config"


def error_response(status: int, code: str, message: str, **headers: str) -> JSONResponse:
    """The control API's error body: `{"error": {"code": ..., "message": ...}}`."""
    from starlette.responses import JSONResponse  # the CLI imports this module; keep it light

    body = {"error": {"code": code, "message": message}}
    return JSONResponse(body, status_code=status, headers=headers or None)
