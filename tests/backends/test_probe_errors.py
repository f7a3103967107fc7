"""A probe that fails on our side (out of descriptors or buffers) is not held against the
server (issue #16, item 1)."""

from __future__ import annotations

import errno
import os

import httpx
import pytest

from llamad.backends.probes import local_cause


def _wrapped(code: int) -> httpx.ConnectError:
    """An OSError as httpx reports it: raised from httpcore's error, raised from it."""
    try:
        try:
            raise OSError(code, os.strerror(code))
        except OSError as inner:
            raise httpx.ConnectError(str(inner)) from inner
    except httpx.ConnectError as outer:
        return outer


@pytest.mark.parametrize("code", [errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM])
def test_local_shortages_are_recognised(code: int) -> None:
    cause = local_cause(_wrapped(code))
    assert cause is not None
    assert cause.errno == code


@pytest.mark.parametrize("code", [errno.ECONNREFUSED, errno.ECONNRESET, errno.EHOSTUNREACH])
def test_server_side_failures_count(code: int) -> None:
    assert local_cause(_wrapped(code)) is None
