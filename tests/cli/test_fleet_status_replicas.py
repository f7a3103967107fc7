"""`llamactl fleet status`'s replica lines, from status documents."""

from __future__ import annotations

from typing import Any

import pytest

from llamad.cli.fleet_replicas import replica_lines, replicas

pytestmark = pytest.mark.timeout(10)


def status(*instances: tuple[str, list[str], bool]) -> dict[str, Any]:
    docs = [
        {"name": n, "gateway": {"routable": routable, "aliases": aliases}}
        for n, aliases, routable in instances
    ]
    return {"gateway": {"listen": "127.0.0.1:8080"}, "instances": docs}


def test_a_model_on_several_hosts_is_listed_with_them() -> None:
    hosts = [
        ("local", status(("qwen", ["chat"], True), ("embed", [], True))),
        ("studio", status(("qwen-big", ["chat", "qwen"], True))),
        ("mini", status(("qwen", [], False))),  # not routed by its gateway: no replica
        ("nogw", {"instances": [{"name": "qwen", "gateway": {"routable": True}}]}),
    ]
    assert replicas(hosts) == {"chat": ["local", "studio"], "qwen": ["local", "studio"]}
    assert replica_lines(hosts) == [
        "replicas: chat on local, studio",
        "replicas: qwen on local, studio",
    ]
    assert replicas(hosts[:1]) == {}


def test_instances_sharing_an_alias_are_replicas_by_host_and_instance() -> None:
    hosts = [
        ("local", status(("gpu0", ["qwen"], True), ("gpu1", ["qwen"], True))),
        ("studio", status(("qwen", [], True))),
    ]
    assert replicas(hosts) == {"qwen": ["local/gpu0", "local/gpu1", "studio"]}
    assert replicas(hosts[:1]) == {"qwen": ["local/gpu0", "local/gpu1"]}
