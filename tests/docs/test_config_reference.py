"""docs/config.md names every key the config accepts, each under its table's heading."""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_pages import DOCS, section
from pydantic import BaseModel

from llamad.backends import rpc
from llamad.backends.catalog_cache import load_catalog
from llamad.backends.tool import ServerCommand
from llamad.config.schema import ConfigFile
from llamad.fleet.table import FLEET_KEYS, PEER_KEYS, Fleet

REFERENCE = DOCS / "config.md"
EXAMPLE_FILE = DOCS.parent / "etc" / "llamad.example.toml"
# Keys a backend takes from an instance table itself, before the rest go to its server:
# llama-server's (model, port, host, rpc), an rpc-worker's, and mlx's allow_remote.
BACKEND_KEYS = frozenset({"model", "port", "host", "rpc", *rpc.WORKER_KEYS})
# "`ctx_size` for `LLAMA_ARG_CTX_SIZE`": the page's examples of the short-key rule.
EXAMPLE = re.compile(r"`([a-z_]+)` for `(LLAMA_[A-Z_]+)`")


def tables(model: type[BaseModel], name: str = "") -> Iterator[tuple[str, frozenset[str]]]:
    """(table, its keys) for `model` and every table nested in it, as the file writes
    them: `daemon.remote`, `instances.NAME`, `fleet.peers`."""
    if name:
        yield name, frozenset(model.model_fields)
    for key, field in model.model_fields.items():
        inner = f"{name}.{key}" if name else key
        for annotation in _members(field.annotation):
            if annotation is Fleet:  # parsed by llamactl's stdlib parser, not pydantic
                yield inner, frozenset(FLEET_KEYS)
                yield f"{inner}.peers", frozenset(PEER_KEYS)
            elif typing.get_origin(annotation) is dict:
                value = typing.get_args(annotation)[1]
                if isinstance(value, type) and issubclass(value, BaseModel):
                    yield from tables(value, f"{inner}.NAME")
                elif not name:
                    yield inner, frozenset()  # [defaults]: llama-server settings
            elif isinstance(annotation, type) and issubclass(annotation, BaseModel):
                yield from tables(annotation, inner)


def _members(annotation: object) -> tuple[object, ...]:
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        return typing.get_args(annotation)
    return (annotation,)


SCHEMA = dict(tables(ConfigFile))


def test_the_walk_finds_every_table() -> None:
    assert set(SCHEMA) >= {
        "daemon",
        "daemon.remote",
        "supervise",
        "defaults",
        "instances.NAME",
        "gateway",
        "gateway.keys.NAME",
        "library",
        "fleet",
        "fleet.peers",
    }
    assert dataclasses.is_dataclass(Fleet)


@pytest.mark.parametrize("table", sorted(SCHEMA))
def test_every_key_is_under_its_table(table: str) -> None:
    keys = SCHEMA[table] | (BACKEND_KEYS if table == "instances.NAME" else frozenset())
    text = section(REFERENCE, f"[{table}]")
    missing = sorted(k for k in keys if f"`{k}`" not in text)
    assert missing == [], f"docs/config.md, [{table}]: not named"


def test_supervise_keys_are_the_instance_override() -> None:
    """`[instances.NAME.supervise]` takes exactly `[supervise]`'s keys."""
    assert "[instances.NAME.supervise]" in REFERENCE.read_text()
    assert "supervise" in SCHEMA["instances.NAME"]


def test_the_short_key_rule_is_what_llama_server_accepts(
    llama_server: Path, tmp_path: Path
) -> None:
    """Each example of the rule on the page resolves, against the real binary's
    catalogue, to the env name it is given for; `no_mmap` is `mmap` inverted."""
    catalog = load_catalog(ServerCommand(llama_server), tmp_path)
    text = REFERENCE.read_text()
    examples = EXAMPLE.findall(text)
    assert len(examples) >= 3
    for key, env in examples:
        found = catalog.lookup(key)
        assert found is not None, key
        assert found.env == env, key
        assert catalog.lookup(env) is not None, env
    no_mmap = catalog.lookup("no_mmap")
    assert no_mmap is not None
    assert (no_mmap.env, no_mmap.invert) == ("LLAMA_ARG_MMAP", True)
    assert "`LLAMA_ARG_MMAP=false`" in text
    assert "(env: NAME)" in text


@pytest.mark.parametrize("table", sorted(SCHEMA))
def test_the_example_file_names_every_key(table: str) -> None:
    """etc/llamad.example.toml is the reference it says it is: each key is set or shown
    commented out (`key =`), a table's own tables by their heading."""
    keys = SCHEMA[table] | (BACKEND_KEYS if table == "instances.NAME" else frozenset())
    text = EXAMPLE_FILE.read_text()
    heading = re.escape(table).replace("NAME", r"[\w-]+")  # [instances.qwen.supervise]
    missing = sorted(
        k
        for k in keys
        if not re.search(rf"^[#\s]*{re.escape(k)}\s*=", text, re.MULTILINE)
        and not re.search(rf"^[#\s]*\[\[?{heading}\.{re.escape(k)}[.\]]", text, re.M)
    )
    assert missing == [], f"etc/llamad.example.toml, [{table}]: not shown"
