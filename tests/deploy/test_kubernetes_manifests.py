"""deploy/kubernetes: every object valid for three supported Kubernetes versions, the
kustomizations rendered by kubectl, and a ConfigMap llamad's own loader accepts, naming
only files the pod has where it has them."""

from __future__ import annotations

import re
import stat
import tomllib
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
from kube_manifests import (
    KUBERNETES,
    KUSTOMIZATIONS,
    documents,
    one,
    render,
    supported_versions,
    validate,
)

from llamad.config.load import load

VERSIONS = supported_versions()
# Files that are not whole objects: the kustomizations, and patches merged into one.
PARTS = {"kustomization.yaml", "gpu.yaml"}


def test_three_versions_are_checked() -> None:
    """The schemas cover three minor versions, the newest the package knows."""
    assert len({v.rsplit(".", 1)[0] for v in VERSIONS}) == 3, VERSIONS


def test_every_object_as_written_is_valid() -> None:
    """Each object file validates on its own: no kubectl needed for this check."""
    files = [p for p in sorted(KUBERNETES.rglob("*.yaml")) if p.name not in PARTS]
    objects = [obj for path in files for obj in documents(path.read_text(encoding="utf-8"))]
    assert {o["kind"] for o in objects} >= {"DaemonSet", "Service", "ServiceAccount"}
    assert validate(objects, VERSIONS) == []


@pytest.mark.parametrize("kustomization", KUSTOMIZATIONS)
def test_rendered_kustomization_is_valid(kustomization: str) -> None:
    """What `kubectl apply -k` sends for the base and each overlay validates."""
    objects = render(kustomization)
    kinds = sorted(o["kind"] for o in objects)
    assert kinds == [
        "ConfigMap", "DaemonSet", "Namespace", "Service", "Service", "ServiceAccount"
    ]  # fmt: skip
    assert validate(objects, VERSIONS) == []
    assert all(o["metadata"].get("namespace") == "llm" for o in objects if o["kind"] != "Namespace")


def test_nvidia_overlay_asks_for_a_gpu() -> None:
    """The overlay adds the GPU, its taint's toleration, its runtime and node label, and
    keeps the base's node label."""
    pod = one(render("nvidia"), "DaemonSet", "llamad")["spec"]["template"]["spec"]
    assert pod["runtimeClassName"] == "nvidia"
    assert pod["nodeSelector"] == {"llamad/serve": "true", "nvidia.com/gpu.present": "true"}
    assert pod["tolerations"][0]["key"] == "nvidia.com/gpu"
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == 1
    assert container["resources"]["limits"]["memory"] == "24Gi"  # the base's, kept
    assert container["image"].endswith(":server-cuda")


def test_pods_hold_no_privilege_they_do_not_need() -> None:
    """Non-root, no capabilities, no escalation, a read-only root, no API token."""
    pod = one(render("base"), "DaemonSet", "llamad")["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] != 0
    assert pod["automountServiceAccountToken"] is False
    for c in pod["initContainers"] + pod["containers"]:
        ctx = c["securityContext"]
        assert ctx == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }, c["name"]
        assert c["resources"]["requests"], c["name"]
    assert not any(k in pod for k in ("hostNetwork", "hostPID", "hostIPC"))


def test_probes_and_services_use_llamads_ports() -> None:
    """Both probes ask the gateway's port (test_kubernetes_pod.py asks their paths of a
    running llamad); the Services reach the ports the ConfigMap's config listens on; the
    fleet's Service is headless."""
    objects = render("base")
    pod = one(objects, "DaemonSet", "llamad")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    for probe in ("readinessProbe", "livenessProbe"):
        assert container[probe]["httpGet"]["port"] == "http"
    fleet = one(objects, "Service", "llamad-fleet")["spec"]
    assert fleet["clusterIP"] == "None"
    assert [p["targetPort"] for p in fleet["ports"]] == ["control"]
    gateway = one(objects, "Service", "llamad")["spec"]
    assert [p["targetPort"] for p in gateway["ports"]] == ["http"]
    config = _config_text(objects)
    assert re.search(rf'^listen = "0\.0\.0\.0:{ports["http"]}"$', config, re.M)
    assert re.search(rf'^listen = "0\.0\.0\.0:{ports["control"]}"$', config, re.M)


def test_grace_period_outlasts_the_daemons_shutdown() -> None:
    """SIGKILL comes after the in-flight requests, the slot saves and the instances'
    stop_timeout have had their time."""
    objects = render("base")
    pod = one(objects, "DaemonSet", "llamad")["spec"]["template"]["spec"]
    config = tomllib.loads(_config_text(objects))
    gateway, supervise = config["gateway"], config.get("supervise", {})
    # Unready before the listener stops, then the requests in flight (a minute unless
    # the config bounds them), a slot save (at most 10 s) and stop_timeout.
    requests = gateway.get("shutdown_delay", 0) + gateway.get("shutdown_grace", 60)
    stop = 10 + supervise.get("stop_timeout", 10)
    assert pod["terminationGracePeriodSeconds"] >= requests + stop


def test_configmap_loads_with_llamads_loader(tmp_path: Path) -> None:
    """The rendered ConfigMap's llamad.toml loads with llamad's own loader, in a copy of
    the pod's file system: the keys the init container installs, owner-only."""
    objects = render("base")
    pod = one(objects, "DaemonSet", "llamad")["spec"]["template"]["spec"]
    mounts = _mounts(pod)
    (init,) = pod["initContainers"]
    program, flag, mode, *sources, target = init["command"]
    assert (program, flag, mode) == ("install", "-m", "0400")
    for source in sources:
        key = tmp_path / target.strip("/") / PurePosixPath(source).name
        key.parent.mkdir(parents=True, exist_ok=True)
        key.write_text("k" * 32 + "\n")
        key.chmod(stat.S_IRUSR)
    config = _config_text(objects)
    for value in re.findall(r'"(/[^"]*)"', config):
        mount = next((m for m in mounts if PurePosixPath(value).is_relative_to(m)), None)
        assert mount is not None, f"{value} is on no volume of the pod"
    # Every absolute path, under the copy of the pod's root.
    path = tmp_path / "etc" / "llamad" / "llamad.toml"
    path.parent.mkdir(parents=True)
    path.write_text(config.replace('"/', f'"{tmp_path}/'), encoding="utf-8")
    resolved = load(path)
    assert resolved.daemon.state_dir == tmp_path / "run/llamad/state"
    for written in (resolved.daemon.state_dir, resolved.daemon.cache_dir):
        mount = PurePosixPath("/", written.relative_to(tmp_path))
        assert any(mount.is_relative_to(m) and not ro for m, ro in mounts.items()), written


def _mounts(pod: dict[str, Any]) -> dict[PurePosixPath, bool]:
    """llamad's container's mount points, each with whether it is read-only."""
    (container,) = pod["containers"]
    return {
        PurePosixPath(m["mountPath"]): bool(m.get("readOnly")) for m in container["volumeMounts"]
    }


def _config_text(objects: list[dict[str, Any]]) -> str:
    text = one(objects, "ConfigMap", "llamad-config")["data"]["llamad.toml"]
    assert isinstance(text, str)
    return text
