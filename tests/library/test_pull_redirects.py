"""A registry's redirect is followed only to an https URL on a public address: never to
loopback, link-local or a private network (a GET the registry could aim anywhere)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hub_stand_in import Hub, serving

from llamad.library.ollama_pull import pull_ollama
from llamad.library.progress import PullError
from llamad.library.redirects import check_redirect
from llamad.library.refs import OllamaRef

GGUF = "application/vnd.ollama.image.model"
REF = OllamaRef("library", "tinyllama", "1b")


@pytest.fixture
def hub() -> Iterator[Hub]:
    hub = Hub()
    hub.ollama["tinyllama:1b"] = [(GGUF, b"GGUF" + bytes(60))]
    with serving(hub):
        yield hub


def pull(hub: Hub, store: Path) -> Path:
    reports: list[dict[str, Any]] = []
    return pull_ollama(REF, hub.url, store, reports.append)


@pytest.mark.timeout(30)
@pytest.mark.parametrize("where", ["manifests/1b", "blobs/{digest}"])
def test_a_redirect_to_loopback_is_refused(hub: Hub, tmp_path: Path, where: str) -> None:
    """The stand-in (itself on loopback: the configured registry is trusted) redirects a
    manifest or a blob to another loopback URL; the pull stops with one clear line."""
    digest = next(iter(hub.blobs()))
    source = f"/v2/library/tinyllama/{where.format(digest=digest)}"
    hub.redirects[source] = f"{hub.url}/secret"
    with pytest.raises(PullError) as err:
        pull(hub, tmp_path / "store")
    message = str(err.value)
    assert message == (
        f"the registry redirected to {hub.url}/secret, which is not https; not followed"
    )
    assert "/secret" not in hub.paths


@pytest.mark.timeout(30)
def test_a_pull_without_redirects_still_lands(hub: Hub, tmp_path: Path) -> None:
    assert pull(hub, tmp_path / "store").is_file()


@pytest.mark.parametrize(
    ("location", "why"),
    [
        ("https://127.0.0.1/x", "loopback, link-local or private address (127.0.0.1)"),
        ("https://localhost:8443/x", "loopback, link-local or private address"),
        ("https://169.254.169.254/latest/meta-data", "(169.254.169.254)"),
        ("https://10.1.2.3/x", "(10.1.2.3)"),
        ("https://[::1]/x", "(::1)"),
        ("https://[fe80::1]/x", "(fe80::1)"),
        ("http://8.8.8.8/x", "is not https"),
        ("ftp://8.8.8.8/x", "is not https"),
    ],
)
def test_a_redirect_is_checked_by_scheme_and_every_address(location: str, why: str) -> None:
    request = httpx.Request("GET", "https://registry.example/v2/x")
    response = httpx.Response(307, headers={"Location": location}, request=request)
    with pytest.raises(PullError, match="not followed") as err:
        check_redirect(response)
    assert why in str(err.value)


def test_a_redirect_to_a_public_https_address_is_followed() -> None:
    request = httpx.Request("GET", "https://registry.example/v2/x")
    check_redirect(httpx.Response(307, headers={"Location": "https://8.8.8.8/b"}, request=request))
    check_redirect(httpx.Response(200, request=request))  # not a redirect: nothing to check
