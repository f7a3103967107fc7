"""deploy/kubernetes as the tests read it: its objects, rendered or as written, and the
official schemas they are checked against."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
KUBERNETES = ROOT / "deploy" / "kubernetes"
# What `kubectl apply -k` is pointed at: the CPU base and each GPU overlay.
KUSTOMIZATIONS = ("base", "nvidia")


def supported_versions(count: int = 3) -> list[str]:
    """The newest `count` Kubernetes minor versions the installed schemas cover:
    upstream supports the newest three."""
    versions = sorted(set(kubernetes_validate.utils.all_versions()), key=_release)
    return versions[-count:]


def _release(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split("."))


def validate(objects: Iterable[dict[str, Any]], versions: list[str]) -> list[str]:
    """One line per object a version's strict schema refuses; empty when all pass."""
    problems = []
    for version in versions:
        for obj in objects:
            try:
                kubernetes_validate.validate(obj, version, strict=True)
            except kubernetes_validate.ValidationError as exc:
                where = "/".join(str(p) for p in exc.path)
                problems.append(f"{version} {name(obj)}: {where}: {exc.message}")
            except kubernetes_validate.SchemaNotFoundError as exc:
                problems.append(f"{version} {name(obj)}: {exc}")
    return problems


def name(obj: dict[str, Any]) -> str:
    """`Kind/name`, for messages."""
    return f"{obj.get('kind')}/{obj.get('metadata', {}).get('name')}"


def documents(text: str) -> list[dict[str, Any]]:
    """The objects of a multi-document YAML text."""
    return [doc for doc in yaml.safe_load_all(text) if doc]


def kubectl() -> str:
    """kubectl's path; the test skips, saying why, where it is not installed."""
    found = shutil.which("kubectl")
    if found is None:
        pytest.skip(
            "kubectl is not installed (Debian: apt-get install kubernetes-client; "
            ".ci/run installs it): the kustomizations were not rendered"
        )
    return found


def render(kustomization: str) -> list[dict[str, Any]]:
    """`kubectl kustomize deploy/kubernetes/NAME`: what `kubectl apply -k` would send."""
    done = subprocess.run(
        [kubectl(), "kustomize", str(KUBERNETES / kustomization)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return documents(done.stdout)


def one(objects: Iterable[dict[str, Any]], kind: str, obj_name: str) -> dict[str, Any]:
    """The object of this kind and name."""
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == obj_name]
    assert len(found) == 1, f"{kind}/{obj_name}: {len(found)} found"
    return found[0]
