"""A real DNS server for the fleet's DNS peers: Debian's dnsmasq on a loopback port,
serving A/AAAA records from a hosts file it reads again on SIGHUP (pods coming and
going), and SRV records from its command line.

`.ci/run` installs it (`dnsmasq-base`); where it is missing the tests skip, saying so.
"""

from __future__ import annotations

import getpass
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dns.exception
import dns.resolver
import pytest
from helpers import free_port, wait_for

TTL = 1  # seconds: the records' TTL, which the fleet takes as its interval


class Dnsmasq:
    """One dnsmasq answering on 127.0.0.1:`port` for the names in `hosts`."""

    def __init__(self, proc: subprocess.Popen[bytes], port: int, hosts: Path) -> None:
        self.proc, self.port, self.hosts = proc, port, hosts

    @property
    def server(self) -> str:
        """`[fleet] dns_server` for it."""
        return f"127.0.0.1:{self.port}"

    def serve(self, name: str, addresses: list[str]) -> None:
        """`name` resolves to `addresses` from now on (none: NXDOMAIN), once dnsmasq
        has read its hosts file again."""
        self.hosts.write_text("".join(f"{a} {name}\n" for a in addresses))
        self.proc.send_signal(signal.SIGHUP)
        want = sorted(addresses)
        wait_for(lambda: self.addresses(name) == want, 10, f"dnsmasq serving {want}")

    def addresses(self, name: str) -> list[str]:
        """What it answers for `name`'s A records now."""
        resolver = dns.resolver.Resolver(configure=False)
        resolver.nameservers, resolver.port = ["127.0.0.1"], self.port
        try:
            answer = resolver.resolve(name, "A", lifetime=2, raise_on_no_answer=False)
        except dns.resolver.NXDOMAIN:
            return []
        return sorted(r.address for r in answer.rrset or [])


@contextmanager
def dnsmasq(base: Path, *extra: str) -> Iterator[Dnsmasq]:
    """dnsmasq on a free loopback port, the one server of `.test`, with an empty hosts
    file and `extra` options;
    stopped (and waited for) on the way out."""
    exe = shutil.which("dnsmasq") or shutil.which("dnsmasq", path="/usr/sbin:/sbin")
    if exe is None:
        pytest.skip("dnsmasq is not installed (Debian's dnsmasq-base; .ci/run installs it)")
    hosts = base / "dns-hosts"
    hosts.write_text("")
    port = free_port()  # free on TCP; dnsmasq takes the same number on UDP too
    argv = [
        exe,
        "--keep-in-foreground",
        "--conf-file=/dev/null",
        f"--port={port}",
        "--listen-address=127.0.0.1",
        "--bind-interfaces",
        "--no-resolv",
        "--local=/test/",  # answered here, NXDOMAIN when unknown (else: REFUSED)
        "--no-hosts",
        f"--addn-hosts={hosts}",
        f"--local-ttl={TTL}",
        f"--user={getpass.getuser()}",  # as root it would drop to nobody: no hosts file then
        "--pid-file=",
        *extra,
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = Dnsmasq(proc, port, hosts)
    try:
        wait_for(lambda: _answers(server) or proc.poll() is not None, 10, "dnsmasq answering")
        if proc.poll() is not None:
            raise RuntimeError(
                f"dnsmasq exited: {proc.stderr.read().decode() if proc.stderr else ''}"
            )
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def _answers(server: Dnsmasq) -> bool:
    try:
        server.addresses("nothing.test")
    except dns.exception.DNSException:
        return False
    return True
