"""The gateway's fleet from DNS, as in a Kubernetes headless Service: dnsmasq names
the pods (real llamads on 127.0.0.2 and 127.0.0.3, the same ports each), and A follows
them as they appear and disappear."""

from __future__ import annotations

import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from dnsmasq import TTL, Dnsmasq, dnsmasq
from fleet_helpers import GW_KEY_B, Host, peer_tables, start, toml
from helpers import free_port, short_dir, wait_for
from remote_helpers import READ, write_token

# Three daemons and two llama-servers on a busy 2-core machine.
pytestmark = pytest.mark.timeout(180)

NAME = "llamad.test"
CHAT = {"model": "shared", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3}
SHARED = {"ctx_size": 256, "n_parallel": 1, "threads": 1}


@dataclass(frozen=True)
class Ports:
    """What every pod listens on, as a DaemonSet's pods do: the same ports, each on
    its own address."""

    control: int
    gateway: int


def _pod(tiny_model: Path, address: str, ports: Ports) -> Host:
    base = short_dir()
    text = toml(
        {
            **peer_tables(base, ports.gateway, ports.control, host=address),
            "instances.shared": {"model": tiny_model, "port": free_port(), **SHARED},
        }
    )
    ld = start(base, text, ports.gateway, ["shared"], host=address)
    return Host(ld, f"http://{address}:{ports.gateway}", f"http://{address}:{ports.control}", base)


def _front(server: Dnsmasq, ports: Ports) -> Host:
    """A: no model of its own; its fleet is whatever NAME resolves to."""
    base, gw = short_dir(), free_port()
    fleet = {
        "dns_name": NAME,
        "dns_port": ports.control,
        "dns_server": server.server,
        # An empty answer (NXDOMAIN: no pod ready) has no records' TTL to go by.
        "dns_interval": TTL,
        "token_file": write_token(base / "read.token", READ),
        "gateway_key_file": write_token(base / "gw.key", GW_KEY_B),
    }
    text = toml(
        {
            "daemon": {"state_dir": base / "state"},
            "gateway": {"listen": f"127.0.0.1:{gw}", "fleet": True},
            "fleet": fleet,
        }
    )
    return Host(start(base, text, gw, []), f"http://127.0.0.1:{gw}", dir=base)


@pytest.fixture
def fleet(tiny_model: Path) -> Iterator[tuple[Dnsmasq, Ports, list[Host]]]:
    """dnsmasq naming no pod yet, and room for the pods a test starts (closed after)."""
    pods: list[Host] = []
    with dnsmasq(short_dir()) as server:
        try:
            yield server, Ports(free_port(), free_port()), pods
        finally:
            for pod in pods:
                pod.ld.close()


def _chat(front: Host) -> int:
    return httpx.post(f"{front.gateway}/v1/chat/completions", json=CHAT, timeout=60).status_code


def test_pods_that_appear_and_disappear(
    tiny_model: Path, fleet: tuple[Dnsmasq, Ports, list[Host]]
) -> None:
    """A pod whose record appears serves A's next request within one resolve interval
    and a miss's refresh; a pod that disappears costs a retry on the other,
    never an error; once its record is gone it is no replica."""
    server, ports, pods = fleet
    pods.append(_pod(tiny_model, "127.0.0.2", ports))
    front = _front(server, ports)
    try:
        assert _chat(front) == 404  # no record: no peer
        server.serve(NAME, ["127.0.0.2"])
        began = time.monotonic()
        wait_for(lambda: _chat(front) == 200, TTL + 10, "A serving the pod that appeared")
        appeared = time.monotonic() - began
        assert appeared < TTL + 5, appeared  # TTL, a miss's refresh, one status and a chat
        print(f"first relayed request {appeared:.2f} s after the record appeared")

        pods.append(_pod(tiny_model, "127.0.0.3", ports))
        server.serve(NAME, ["127.0.0.2", "127.0.0.3"])
        both = ["127.0.0.2:" + str(ports.control), "127.0.0.3:" + str(ports.control)]
        wait_for(
            lambda: front.models().get("shared", {}).get("llamad", {}).get("replicas") == both,
            20,
            "A seeing both pods as replicas",
        )

        pods[1].ld.close()  # the pod is gone before A has asked DNS again
        with ThreadPoolExecutor(4) as pool:
            codes = list(pool.map(lambda _: _chat(front), range(4)))
        assert codes == [200] * 4
        # A request sent there went again to the other; or a poll found it gone first.
        assert front.ld.events("gateway.resending") or front.ld.events("gateway.peer_unreachable")

        server.serve(NAME, ["127.0.0.2"])
        wait_for(
            lambda: front.models()["shared"]["llamad"].get("replicas") == both[:1],
            TTL + 10,
            "A dropping the pod whose record went",
        )
        assert _chat(front) == 200
        assert not front.ld.events("fleet.dns_failed")
        assert front.ld.stop() == 0
    finally:
        front.ld.close()
