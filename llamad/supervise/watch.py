"""One running child, watched: its health probes and remote RPC workers while it runs,
then its exit, each reported to its instance as an event on the instance's queue."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any, Protocol

import structlog

from llamad.backends.health_watch import Phase, watch_health
from llamad.backends.probes import Health
from llamad.backends.spec import InstanceSpec
from llamad.fleet.remote_workers import Found
from llamad.lifecycle.states import Event, Exited, ProbeFailed, ProbeOk, Ready, Record
from llamad.supervise.childlog import ChildLog
from llamad.supervise.hooks import InstanceHooks
from llamad.supervise.process import Child, ExitInfo
from llamad.supervise.runtime import Runtime

log = structlog.get_logger("llamad.instance")


class Watched(Protocol):
    """What the watch needs of its instance (`supervise.instance.Instance`)."""

    spec: InstanceSpec
    runtime: Runtime
    hooks: InstanceHooks
    log: ChildLog
    record: Record
    health: Health | None
    last_exit: ExitInfo | None

    def post(self, event: Event) -> None: ...

    def helper(self, coro: Coroutine[Any, Any, None], name: str) -> asyncio.Task[None]: ...


async def watch(inst: Watched, child: Child, remote: Found) -> None:
    """Probe `child` and watch its remote workers until it exits, then report the exit."""
    peers = inst.helper(
        inst.runtime.watch_remote(
            lambda: inst.spec, remote, lambda w: inst.hooks.remote_lost(inst.spec.name, w)
        ),
        f"rpc-{child.pid}",
    )
    probes = inst.helper(
        watch_health(
            inst.runtime.probe_for(inst.spec, lambda: inst.spec.knobs),
            lambda: inst.spec.knobs,
            lambda health, phase: report(inst, child.pid, health, phase),
        ),
        f"probe-{child.pid}",
    )
    try:
        info = await child.wait()
    finally:
        probes.cancel()
        peers.cancel()
    inst.last_exit = info
    try:
        reason = await inst.runtime.reaped(inst.spec, child, info)
    except Exception as exc:  # the exit must be reported whatever the book-keeping did
        reason = f"{info.describe()} (and {type(exc).__name__}: {exc})"
    inst.hooks.exited(inst.spec.name)
    inst.log.mark(f"pid {child.pid} {reason}")
    fields = {"instance": inst.spec.name, "pid": child.pid, "code": info.code}
    if info.signal == "SIGKILL":  # the OOM killer or a person: worth a warning
        log.warning("instance.exited", **fields, signal=info.signal)
    else:
        log.info("instance.exited", **fields, signal=info.signal)
    inst.post(Exited(child.pid, inst.log.redact(reason)))


def report(inst: Watched, pid: int, health: Health, phase: Phase) -> None:
    """Turn one probe result into the instance's event, if it is news."""
    if health.local:
        # Out of descriptors or buffers here, or our loop too busy to read the answer in
        # time: the server may be perfectly fine, and killing it for our shortage would
        # turn a hiccup into an outage.
        inst.hooks.observe_probe(inst.spec.name, health)
        if health.loop_lag is not None:
            log.warning("probe.loop_late", instance=inst.spec.name, lag_s=round(health.loop_lag, 3))
        else:
            log.warning("probe.not_made", instance=inst.spec.name, error=health.error)
        return
    inst.health = health
    inst.hooks.observe_probe(inst.spec.name, health)
    if phase == "loading" and not health.fatal:
        return  # a 503 or a refused connection while loading is not news
    if phase == "ready":
        inst.post(Ready(pid))
    elif health.ok:
        # An OK probe only matters after failed ones; skipping the no-op event keeps
        # an idle daemon's CPU down (one probe per instance per interval).
        if inst.record.probe_failures:
            inst.post(ProbeOk(pid))
    else:
        inst.post(ProbeFailed(pid, health.error or "", health.fatal))
