"""`[fleet] dns_name`: peers from a real DNS server (dnsmasq on loopback), A/AAAA with
`dns_port` or SRV with the port in the record, asked again as records change."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import pytest
import structlog
from dnsmasq import TTL, dnsmasq
from helpers import free_port

from llamad.fleet import dns_peers
from llamad.fleet.dns_peers import DnsPeers, Source
from llamad.fleet.table import Fleet, parse_fleet


def _source(server: str, name: str = "llamad.test", **keys: object) -> Source:
    fleet, problems = parse_fleet(
        {"dns_name": name, "dns_server": server, "dns_port": 7001, **keys}, Path("/")
    )
    assert not problems
    source = Source.of(fleet)
    assert source is not None
    return source


def _urls(peers: list[object]) -> list[str]:
    return [p.url for p in peers]  # type: ignore[attr-defined]


async def test_pods_that_come_and_go_are_followed(tmp_path: Path) -> None:
    """A/AAAA records at dns_port: each address is a peer named ADDRESS:PORT; a record
    added or removed shows at the first resolution after the records' TTL."""
    with dnsmasq(tmp_path, "--host-record=v6.test,::1") as server:
        peers = DnsPeers(_source(server.server))
        assert await peers.peers() == []  # NXDOMAIN: no pod is ready, no error
        server.serve("llamad.test", ["127.0.0.2", "127.0.0.3"])
        peers = DnsPeers(_source(server.server))  # an empty answer waits the default 5 s
        found = await peers.peers()
        assert _urls(found) == ["http://127.0.0.2:7001", "http://127.0.0.3:7001"]
        assert [(p.name, p.source) for p in found] == [
            ("127.0.0.2:7001", "dns"),
            ("127.0.0.3:7001", "dns"),
        ]
        server.serve("llamad.test", ["127.0.0.3"])
        assert _urls(await peers.peers()) == _urls(found)  # within the TTL: not asked again
        began = time.monotonic()
        while _urls(await peers.peers()) != ["http://127.0.0.3:7001"]:
            assert time.monotonic() - began < TTL + 2, "the removed pod was still a peer"
        six = await DnsPeers(_source(server.server, "v6.test")).peers()
        assert [(p.name, p.url) for p in six] == [("[::1]:7001", "http://[::1]:7001")]


async def test_srv_records_give_each_pod_its_port(tmp_path: Path) -> None:
    """An SRV name (`_control._tcp.NAME`): each target's address at the record's port,
    the peer named by the target's first label."""
    srv = "_control._tcp.llamad.test"
    with dnsmasq(
        tmp_path,
        f"--srv-host={srv},pod-0.llamad.test,7101",
        f"--srv-host={srv},pod-1.llamad.test,7102",
        f"--srv-host={srv},gone.llamad.test,7103",  # a target without an address: skipped
        "--host-record=pod-0.llamad.test,127.0.0.4",
        "--host-record=pod-1.llamad.test,127.0.0.5",
    ) as server:
        found = await DnsPeers(_source(server.server, srv)).peers()
    assert [(p.name, p.url) for p in found] == [
        ("pod-0:7101", "http://127.0.0.4:7101"),
        ("pod-1:7102", "http://127.0.0.5:7102"),
    ]


async def test_a_configured_interval_overrides_the_ttl(tmp_path: Path) -> None:
    """With dns_interval, a record that changed is not asked for before it has passed,
    however short the records' TTL."""
    with dnsmasq(tmp_path) as server:
        server.serve("llamad.test", ["127.0.0.2"])
        peers = DnsPeers(_source(server.server, dns_interval=60))
        first = _urls(await peers.peers())
        server.serve("llamad.test", ["127.0.0.3"])
        began = time.monotonic()
        while time.monotonic() - began < TTL + 0.5:
            assert _urls(await peers.peers()) == first
            await asyncio.sleep(0.05)  # paces the loop; the deadline is the condition


async def test_a_dead_server_keeps_the_last_peers_and_is_logged_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server stops answering: the peers it named last stay (a resolver's hiccup
    must not empty the fleet), and one event says so, however often it is asked."""
    monkeypatch.setattr(dns_peers, "LIFETIME_S", 0.3)
    with dnsmasq(tmp_path) as server:
        server.serve("llamad.test", ["127.0.0.2"])
        peers = DnsPeers(_source(server.server, dns_interval=0.01))
        assert _urls(await peers.peers()) == ["http://127.0.0.2:7001"]
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            await asyncio.sleep(0.02)  # past dns_interval: each call asks again
            assert _urls(await peers.peers()) == ["http://127.0.0.2:7001"]
    failed = [e for e in logs if e["event"] == "fleet.dns_failed"]
    assert len(failed) == 1
    assert failed[0]["name"] == "llamad.test"


async def test_nothing_listening_is_no_peers() -> None:
    """A server that never answered: no peers, no exception."""
    port = free_port()
    fleet = Fleet(dns_name="llamad.test", dns_server=f"127.0.0.1:{port}")
    source = Source.of(fleet)
    assert source is not None
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(dns_peers, "LIFETIME_S", 0.3)
        assert await DnsPeers(source).peers() == []


@pytest.mark.parametrize(
    ("key", "value", "said"),
    [
        ("dns_name", "", "must be a DNS name"),
        ("dns_name", 5, "must be a DNS name"),
        ("dns_port", 0, "must be a port from 1 to 65535"),
        ("dns_port", True, "must be a port from 1 to 65535"),
        ("dns_server", "dns.example:53", "must be IP or IP:PORT"),
        ("dns_server", "127.0.0.1:99999", "must be IP or IP:PORT"),
        ("dns_server", "[::1", "must be IP or IP:PORT"),
        ("dns_interval", 0, "must be a positive number of seconds"),
        ("dns_interval", "5s", "must be a positive number of seconds"),
    ],
)
def test_bad_dns_keys_are_named(key: str, value: object, said: str) -> None:
    """Each bad `dns_*` value is one problem naming its key and the value."""
    _, problems = parse_fleet({key: value}, Path("/"))
    assert [p.dotted for p in problems] == [f"fleet.{key}"]
    assert said in problems[0].message
    assert repr(value) in problems[0].message


@pytest.mark.parametrize(
    ("text", "server"),
    [
        ("10.43.0.10", ("10.43.0.10", 53)),
        ("127.0.0.1:5353", ("127.0.0.1", 5353)),
        ("[::1]:5353", ("::1", 5353)),
        ("::1", ("::1", 53)),
        ("[fd00::a]", ("fd00::a", 53)),
    ],
)
def test_dns_server_forms(text: str, server: tuple[str, int]) -> None:
    """`dns_server`: an address, with a port or without (53)."""
    source = Source.of(Fleet(dns_name="x.test", dns_server=text))
    assert source is not None
    assert source.server == server


def test_the_daemon_imports_dnspython_only_for_a_dns_name() -> None:
    """dnspython costs a start a good part of a second: the fleet's hosts load without it."""
    code = "import sys, llamad.gateway.fleet.hosts; print('dns' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, text=True)
    assert out.stdout.strip() == "False"


async def test_no_resolver_configuration_is_a_failure_logged_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Without /etc/resolv.conf dnspython cannot make a system resolver: no peers, one
    event, and the fleet's refresh goes on."""
    import dns.asyncresolver
    import dns.resolver

    def missing(configure: bool = True) -> None:
        raise dns.resolver.NoResolverConfiguration("no nameservers")

    monkeypatch.setattr(dns.asyncresolver, "Resolver", missing)
    peers = DnsPeers(Source("llamad.test", 7001, None, 0.001))
    with structlog.testing.capture_logs() as logs:
        for _ in range(3):
            await asyncio.sleep(0.002)  # past dns_interval: each call asks again
            assert await peers.peers() == []
    failed = [e for e in logs if e["event"] == "fleet.dns_failed"]
    assert len(failed) == 1
    assert "no resolver configuration" in failed[0]["error"]
