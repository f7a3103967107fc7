"""The tests' JSON-prefix check, which the JSON-mode rows rely on."""

from __future__ import annotations

import pytest
from client_helpers import is_json_prefix


@pytest.mark.parametrize(
    "text", ["", "{", '{"a', '{"a"', '{"a":', '{"a":tr', '{"a":1,', '{"a":[1,"x\\', '{"a":1}']
)
def test_prefixes_of_json(text: str) -> None:
    assert is_json_prefix(text)


@pytest.mark.parametrize("text", ["hello", "{]", '{"a":1}}', "{a", ")+)"])
def test_not_json(text: str) -> None:
    assert not is_json_prefix(text)
