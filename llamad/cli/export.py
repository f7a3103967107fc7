"""`llamactl export`: what another system needs to reach llamad, as that system reads it.

`kubernetes`: a Service without a selector and the EndpointSlice naming this machine, so
pods reach a llamad outside the cluster (a Mac's Metal) by a Service name, the shape
LLMKube's macOS agent registers. `litellm`: a LiteLLM proxy `model_list` with one entry
per model and alias llamad serves. Standard library only (llamactl stays light).
"""

from __future__ import annotations

import ipaddress
import json
import re

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping
    from typing import Any

# A Service's name (RFC 1035 label, as Kubernetes checks it).
_DNS_LABEL = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
# Keys written bare: the documents' own field names (a YAML 1.1 boolean word never is one).
_PLAIN_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_./-]*")
_WORDS = {"y", "n", "yes", "no", "on", "off", "true", "false", "null"}
# Not the EndpointSlice controller's own value: that controller would delete the slice.
MANAGED_BY = "llamactl"


class ExportError(ValueError):
    """A value the exported document cannot hold; the message is one line."""


def service_name(text: str) -> str:
    """`text` as a Service name: lower case, other characters as `-`, at most 63."""
    name = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].rstrip("-")
    if not name or not name[0].isalpha():
        name = f"llamad-{name}".rstrip("-")[:63].rstrip("-")
    return name


def kubernetes(name: str, namespace: str, address: str, ports: Mapping[str, int]) -> str:
    """The Service and its EndpointSlice: `ports` (name -> port) of `address`."""
    for what, value in (("--name", name), ("--namespace", namespace)):
        if not _DNS_LABEL.fullmatch(value):
            raise ExportError(
                f"{what}: {value!r} is not a DNS label (lower case letters, digits and -, "
                "starting with a letter, at most 63)"
            )
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        raise ExportError(
            f"--address: {address!r} is not an IP address (an EndpointSlice holds the "
            "address the cluster reaches this machine at)"
        ) from None
    if ip.is_loopback or ip.is_unspecified:
        raise ExportError(
            f"{address} is not an address the cluster can reach: give --address IP "
            "(this machine's, as the cluster's nodes reach it)"
        )
    for port_name, port in ports.items():
        if not 0 < port < 65536:
            raise ExportError(f"port {port_name}: {port} is not a TCP port")
    labels = {"app.kubernetes.io/name": "llamad", "app.kubernetes.io/managed-by": MANAGED_BY}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": namespace, "labels": labels},
        "spec": {
            "ports": [
                {"name": n, "port": p, "targetPort": p, "protocol": "TCP"} for n, p in ports.items()
            ]
        },
    }
    addressed = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{name}-1",
            "namespace": namespace,
            "labels": {
                # Ties the slice to the Service: kube-proxy and the cluster's DNS read it.
                "kubernetes.io/service-name": name,
                "endpointslice.kubernetes.io/managed-by": MANAGED_BY,
                **labels,
            },
        },
        "addressType": f"IPv{ip.version}",
        "ports": [{"name": n, "port": p, "protocol": "TCP"} for n, p in ports.items()],
        "endpoints": [{"addresses": [str(ip)], "conditions": {"ready": True}}],
    }
    return "---\n".join(yaml_text(doc) for doc in (service, addressed))


def litellm(models: Iterable[str], api_base: str, key_env: str) -> str:
    """A LiteLLM proxy config's `model_list`: each name through llamad's gateway at
    `api_base` (its `/v1`), the key read from the proxy's environment variable `key_env`."""
    entries = [
        {
            "model_name": model,
            "litellm_params": {
                # LiteLLM's OpenAI-compatible provider: the name after `openai/` is sent.
                "model": f"openai/{model}",
                "api_base": api_base,
                "api_key": f"os.environ/{key_env}",
            },
        }
        for model in dict.fromkeys(models)
    ]
    if not entries:
        raise ExportError("llamad serves no model to list")
    return yaml_text({"model_list": entries})


def yaml_text(doc: Any, indent: str = "") -> str:
    """`doc` (mappings, lists, strings, numbers, booleans) as block YAML. Every value is
    written as JSON writes it (a JSON string is a YAML double-quoted scalar), so no value
    can change the document's shape; keys are bare when they are plain field names."""
    lines: list[str] = []
    _emit(doc, indent, lines)
    return "\n".join(lines) + "\n"


def _emit(doc: Any, indent: str, lines: list[str]) -> None:
    if isinstance(doc, dict):
        for key, value in doc.items():
            text = (
                key if _PLAIN_KEY.fullmatch(key) and key.lower() not in _WORDS else json.dumps(key)
            )
            if _scalar(value):
                lines.append(f"{indent}{text}: {json.dumps(value)}")
            else:
                lines.append(f"{indent}{text}:")
                _emit(value, indent + "  ", lines)
    elif isinstance(doc, list):
        for item in doc:
            if _scalar(item):
                lines.append(f"{indent}- {json.dumps(item)}")
                continue
            start = len(lines)
            _emit(item, indent + "  ", lines)
            lines[start] = f"{indent}- {lines[start][len(indent) + 2 :]}"
    else:
        raise TypeError(f"not a mapping or a list: {doc!r}")


def _scalar(value: Any) -> bool:
    """Written on its key's line: a scalar, or an empty list or mapping (`[]`, `{}`)."""
    empty = isinstance(value, list | dict) and not value
    return empty or value is None or isinstance(value, str | int | float | bool)
