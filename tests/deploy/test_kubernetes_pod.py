"""The ConfigMap's config runs as the DaemonSet's pod runs it: llamad started on a copy
of the pod's file system (the keys the init container installs, the 0777 emptyDir, the
node's models and cache), answering the kubelet's probes and an app's chat by the
library name of a model on the node."""

from __future__ import annotations

import shutil
import stat
from pathlib import Path, PurePosixPath

import httpx
import ifaddr
import pytest
from helpers import Llamad, free_port, short_dir, wait_for
from kube_manifests import one, render

KEY = "k" * 32


@pytest.mark.timeout(240)
def test_the_configmap_runs_in_a_copy_of_the_pod(tiny_model: Path) -> None:
    objects = render("base")
    pod = one(objects, "DaemonSet", "llamad")["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    ports = {p["name"]: p["containerPort"] for p in container["ports"]}
    root = short_dir()
    try:
        (root / "run/llamad").mkdir(parents=True)
        (root / "run/llamad").chmod(0o777)  # an emptyDir: anyone may write it
        (init,) = pod["initContainers"]
        *_, target = init["command"]
        for source in init["command"][3:-1]:
            key = root / target.strip("/") / PurePosixPath(source).name
            key.parent.mkdir(parents=True, exist_ok=True)
            key.write_text(KEY + "\n")
            key.chmod(stat.S_IRUSR)
        (root / "models").mkdir()
        shutil.copy(tiny_model, root / "models/tiny-pod.gguf")
        (root / "var/cache/llamad").mkdir(parents=True, mode=0o700)
        gateway, control = free_port(), free_port()
        text = one(objects, "ConfigMap", "llamad-config")["data"]["llamad.toml"]
        text = text.replace('"/', f'"{root}/')
        text = text.replace(f':{ports["http"]}"', f':{gateway}"')
        text = text.replace(f':{ports["control"]}"', f':{control}"')
        config = root / "etc/llamad/llamad.toml"
        config.parent.mkdir(parents=True)
        config.write_text(text)
        with Llamad(config) as ld:
            # Generous: a busy machine may take long to import and start (it is not the
            # point here).
            ld.wait_ready(60)
            ld.wait_event("gateway.listening", 60)
            base = f"http://127.0.0.1:{gateway}"
            # The kubelet's probes, as the DaemonSet names them: no key, sent to the pod's
            # own address (Host: that address and port).
            for probe in ("readinessProbe", "livenessProbe"):
                url = f"http://{_pod_ip()}:{gateway}{container[probe]['httpGet']['path']}"
                wait_for(lambda url=url: _get(url) == 200, 10, f"{probe}'s 200")
            # An app in the cluster, by the gateway Service's name.
            answer = httpx.post(
                f"{base}/v1/chat/completions",
                headers={"Host": "llamad.llm.svc.cluster.local:8080",
                         "Authorization": f"Bearer {KEY}"},
                json={"model": "tiny-pod", "messages": [{"role": "user", "content": "hi"}],
                      "max_tokens": 3},
                timeout=60,
            )  # fmt: skip
            assert answer.status_code == 200, answer.text
            state = root / "run/llamad/state"
            assert stat.S_IMODE(state.stat().st_mode) == 0o700
            # No mDNS on a pod network: the fleet's peers come from the cluster's DNS.
            assert ld.events("discovery.advertising") == []
            assert ld.stop() == 0
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _pod_ip() -> str:
    """This machine's first address beyond loopback, as a pod's IP is; else loopback."""
    for adapter in ifaddr.get_adapters():
        for ip in adapter.ips:
            if isinstance(ip.ip, str) and not ip.ip.startswith("127."):
                return ip.ip
    return "127.0.0.1"


def _get(url: str) -> int | None:
    try:
        return httpx.get(url, timeout=2, trust_env=False).status_code
    except httpx.HTTPError:
        return None
