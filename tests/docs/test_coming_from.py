"""The defaults docs/coming-from.md states are the config's own: each claim is read from
the page as written and its value from the schema, so neither can change alone."""

from __future__ import annotations

import pytest
from doc_pages import DOCS
from pydantic import BaseModel

from llamad.config.gateway_table import GatewaySettings
from llamad.config.library_specs import DEFAULT_CTX
from llamad.config.library_table import LibrarySettings
from llamad.config.schema import InstanceTable, SuperviseSettings

PAGE = DOCS / "coming-from.md"


def default(model: type[BaseModel], key: str) -> object:
    return model.model_fields[key].default


# (the words on the page, the value they state, the config's own)
CLAIMS: list[tuple[str, object, object]] = [
    (
        "`[library] idle_timeout = 300.0` (the default)",
        300.0,
        default(LibrarySettings, "idle_timeout"),
    ),
    ("`idle_timeout` (600 s by default)", 600.0, default(InstanceTable, "idle_timeout")),
    ("`[gateway] max_loaded` (0, the default", 0, default(GatewaySettings, "max_loaded")),
    ("`[gateway] max_queue` (per model; 64)", 64, default(GatewaySettings, "max_queue")),
    ("and `queue_timeout` (120 s)", 120.0, default(GatewaySettings, "queue_timeout")),
    (
        "`[gateway] list_aliases` (`true` by default)",
        True,
        default(GatewaySettings, "list_aliases"),
    ),
    ("`[supervise] start_timeout` (600 s)", 600.0, default(SuperviseSettings, "start_timeout")),
    ("`[library.defaults]` (4096 unless set)", 4096, DEFAULT_CTX),
]


@pytest.mark.parametrize(("words", "stated", "actual"), CLAIMS, ids=[c[0] for c in CLAIMS])
def test_a_stated_default_is_the_configs(words: str, stated: object, actual: object) -> None:
    assert words in PAGE.read_text(encoding="utf-8")
    assert stated == actual
