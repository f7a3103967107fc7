"""Pins, groups, exclusive sets and names that choose: resolved, and one-line errors
naming the file, the key and the value."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamad.config.load import check, load

CONFIG = """
[gateway]
listen = "127.0.0.1:18999"

[gateway.groups.pair]
models = ["a", "b"]

[gateway.exclusive.big]
models = ["a", "c"]

[gateway.names.chat]
models = ["c", "a-alias", "always"]

[instances.a]
model = "{m}"
port = 18998
on_demand = true
aliases = ["a-alias"]

[instances.b]
model = "{m}"
port = 18997
on_demand = true

[instances.c]
model = "{m}"
port = 18996
on_demand = true
evict = "never"

[instances.always]
model = "{m}"
port = 18995
"""


def _config(d: Path, model: Path, *change: str) -> Path:
    text = CONFIG.replace("{m}", str(model))
    path = d / "llamad.toml"
    path.write_text(text.replace(*change) if change else text)
    return path


def test_sets_resolve_to_instances(tmp_path: Path, tiny_model: Path) -> None:
    resolved = load(_config(tmp_path, tiny_model))
    gw = resolved.gateway
    assert gw is not None
    assert [(s.name, s.models) for s in gw.groups] == [("pair", ("a", "b"))]
    assert [(s.name, s.models) for s in gw.exclusive] == [("big", ("a", "c"))]
    assert [(s.name, s.models) for s in gw.names] == [("chat", ("c", "a", "always"))]
    assert resolved.instances["c"].pinned
    assert not resolved.instances["a"].pinned


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ('models = ["a", "b"]', 'models = ["a", "nope"]'),
            "llamad.toml:6: gateway.groups.pair.models: 'nope' is no instance nor alias",
        ),
        (
            ('models = ["a", "b"]', 'models = ["a", "always"]'),
            "llamad.toml:6: gateway.groups.pair.models: 'always' is not on_demand",
        ),
        (
            ('models = ["a", "b"]', 'models = ["a"]'),
            "llamad.toml:6: gateway.groups.pair.models: ['a'] holds one model",
        ),
        (
            ('models = ["a", "b"]', 'models = ["b", "c"]'),
            'llamad.toml:6: gateway.groups.pair.models: instances.c has evict = "never" '
            "and instances.b does not",
        ),
        (
            ("[gateway.names.chat]", "[gateway.names.b]"),
            "llamad.toml:11: gateway.names.b: 'b' is already a model name (instances.b)",
        ),
        (
            ('models = ["c", "a-alias", "always"]', "models = []"),
            "llamad.toml:12: gateway.names.chat.models: ",
        ),
        (
            ('models = ["a", "c"]', 'models = ["a", "b"]'),
            "llamad.toml:9: gateway.exclusive.big.models: instances.a and instances.b are both "
            "in gateway.groups.pair",
        ),
    ],
    ids=["unknown", "always-on", "one model", "half pinned", "name taken", "empty", "overlap"],
)
def test_set_errors_are_one_line(
    tmp_path: Path, tiny_model: Path, change: tuple[str, str], expected: str
) -> None:
    found = check(_config(tmp_path, tiny_model, *change))
    # One line, naming the file (with the line number), the key and the value.
    assert [line.startswith(str(tmp_path)) and expected in line for line in found] == [True], found


def test_evict_takes_auto_or_never(tmp_path: Path, tiny_model: Path) -> None:
    found = check(_config(tmp_path, tiny_model, 'evict = "never"', 'evict = "sometimes"'))
    assert "llamad.toml:29: instances.c.evict: input should be 'auto' or 'never'" in found[0]
