"""The model-name rules, by table: shared aliases make replicas, instance names stay
one instance's, and replicas agree on their kind and spelling."""

from __future__ import annotations

from pathlib import Path

import pytest

from llamad.backends.spec import InstanceSpec
from llamad.config.model_names import check_names, owners, replica_warnings


def spec(
    name: str, *aliases: str, kind: str = "llama-server", model: str = "m.gguf"
) -> InstanceSpec:
    return InstanceSpec(name, "127.0.0.1", 0, Path(model), (), (), (), aliases=aliases, kind=kind)


def problems(*specs: InstanceSpec) -> list[str]:
    found: list[str] = []
    check_names(
        {s.name: s for s in specs}, lambda keys, msg: found.append(f"{'.'.join(keys)}: {msg}")
    )
    return found


@pytest.mark.parametrize(
    ("specs", "expected"),
    [
        ((spec("a", "q"), spec("b", "q"), spec("c", "q")), []),
        ((spec("a", "q:latest"), spec("b", "q:latest")), []),
        ((spec("a", "b"), spec("b")), ["instances.a.aliases: model name 'b' is instances.b;"]),
        ((spec("a", "a"),), ["instances.a.aliases: model name 'a' is instances.a;"]),
        (
            (spec("a"), spec("b", "a:latest")),
            ["instances.b.aliases: model name 'a:latest' is instances.a (Ollama reads"],
        ),
        (
            (spec("a", "q"), spec("b", "q:latest")),
            ["instances.b.aliases: alias 'q:latest' is spelt 'q' by instances.a"],
        ),
        (
            (spec("a", "q"), spec("b", "q", kind="mlx")),
            ["instances.b.aliases: alias 'q' is shared with instances.a, of kind 'llama-server'"],
        ),
    ],
    ids=[
        "three replicas",
        "Ollama spelling",
        "alias is an instance",
        "alias is its own name",
        "alias is an instance as Ollama reads it",
        "spelt two ways",
        "two kinds",
    ],
)
def test_names(specs: tuple[InstanceSpec, ...], expected: list[str]) -> None:
    found = problems(*specs)
    assert len(found) == len(expected), found
    for got, want in zip(found, expected, strict=True):
        assert got.startswith(want), got


def test_replicas_of_other_files_warn_once_each() -> None:
    specs = {s.name: s for s in (spec("a", "q"), spec("b", "q"), spec("c", "q", model="o.gguf"))}
    ((keys, message),) = replica_warnings(specs)
    assert keys == ("instances", "c", "aliases")
    assert message.startswith(
        "alias 'q' is shared with instances.a, which serves m.gguf, not o.gguf"
    )


def test_a_shared_alias_owns_every_replica() -> None:
    found = owners({s.name: s for s in (spec("a", "q"), spec("b", "q"))})
    assert found == {"a": {"a"}, "b": {"b"}, "q": {"a", "b"}}
