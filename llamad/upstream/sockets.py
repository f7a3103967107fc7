"""What the pool asks of a connection's socket: is anything pending on it while it sat
idle, and should the kernel probe the peer while a long answer is silent.
"""

from __future__ import annotations

import asyncio
import ipaddress
import select
import socket

# A peer across the network that vanishes (a laptop asleep, a cable pulled) sends no FIN;
# probes find it within about a minute instead of the kernel's two hours.
KEEPALIVE_IDLE_S = 30
KEEPALIVE_INTERVAL_S = 10
KEEPALIVE_PROBES = 3


def wants_keepalive(peer: str) -> bool:
    """TCP keep-alive for a peer that is not this machine (an IP address as the socket
    reports it; anything unparsable counts as remote)."""
    try:
        return not ipaddress.ip_address(peer.split("%", 1)[0]).is_loopback
    except ValueError:
        return True


def self_connected(transport: asyncio.BaseTransport) -> bool:
    """A connection to a port nobody listens on, made from that same port (possible in the
    ephemeral range): both ends are ours."""
    mine, peer = transport.get_extra_info("sockname"), transport.get_extra_info("peername")
    return mine is not None and mine == peer


def set_keepalive(transport: asyncio.BaseTransport) -> bool:
    """Turn on TCP keep-alive when the peer is remote; whether it did (best effort)."""
    sock = transport.get_extra_info("socket")
    peer = transport.get_extra_info("peername")
    if sock is None or not peer or not wants_keepalive(str(peer[0])):
        return False
    # Linux names the idle time TCP_KEEPIDLE, macOS TCP_KEEPALIVE.
    idle = getattr(socket, "TCP_KEEPIDLE", None) or getattr(socket, "TCP_KEEPALIVE", None)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
        for option, value in (
            (idle, KEEPALIVE_IDLE_S),
            (getattr(socket, "TCP_KEEPINTVL", None), KEEPALIVE_INTERVAL_S),
            (getattr(socket, "TCP_KEEPCNT", None), KEEPALIVE_PROBES),
        ):
            if option is not None:
                sock.setsockopt(socket.IPPROTO_TCP, option, value)
    except OSError:
        return False  # the connection broke already: its request will say so
    return True


def readable(transport: asyncio.BaseTransport) -> bool:
    """Something is pending on an idle connection: an EOF or bytes the event loop has not
    read yet. Either way the server is done with it, and a request written there could
    be lost or answered by what was pending."""
    sock = transport.get_extra_info("socket")
    if sock is None or sock.fileno() < 0:
        return True  # closed already
    poller = select.poll()
    poller.register(sock.fileno(), select.POLLIN | select.POLLPRI)
    return bool(poller.poll(0))
