"""The peer document (`GET /v1/fleet`): what other llamads' gateways read of this one,
and nothing that changes while nothing they use does.

Every gateway with `[gateway] fleet = true` asks each peer every 5 s: N nodes make
N x (N - 1) asks. The status document changes at each of them (uptimes, CPU, probe
times) and costs a process query per instance; this one is built from the gateway's
books alone and carries an ETag, so an unchanged peer answers 304 with no body
(`conditional.py`). Its keys are the status document's, so a gateway reads either
(`gateway/fleet/models.py` falls back to `/v1/status` on a llamad without this route).
"""

from __future__ import annotations

from typing import Any

# Memory left is told in steps of this: the footprints it is computed from move by a
# few pages while models sit idle, and the fleet only compares peers' room for a model.
LEFT_STEP = 64 << 20
# The parts of an instance's `gateway` object a peer's choice reads (peer_models.py).
ROUTING_KEYS = ("routable", "aliases", "on_demand", "slots", "in_flight", "queued", "relayed")


def peer_doc(
    daemon: dict[str, Any],
    routed: list[tuple[str, str, dict[str, Any]]],
    gateway: dict[str, Any] | None,
) -> dict[str, Any]:
    """The document: `daemon`'s identity and version, each routed instance's (name,
    state, `gateway` object) with the parts a choice reads, and the gateway's address
    and room (its daemon-wide `gateway` object) when there is one."""
    doc: dict[str, Any] = {
        "daemon": {k: daemon.get(k) for k in ("pid", "started_at", "config_path", "version")},
        "instances": [
            {"name": name, "state": state, "gateway": {k: gw.get(k) for k in ROUTING_KEYS}}
            for name, state, gw in routed
        ],
    }
    if gateway is not None:
        devices = gateway.get("devices") or []
        doc["gateway"] = {
            "listen": gateway.get("listen"),
            "left_bytes": _stepped(gateway.get("left_bytes")),
            "devices": [
                {"left_bytes": _stepped(d.get("left_bytes")), "unified": d.get("unified")}
                for d in devices
                if isinstance(d, dict)
            ],
        }
    return doc


def _stepped(value: object) -> int | None:
    if not isinstance(value, int) or isinstance(value, bool):
        return None
    return value - value % LEFT_STEP
