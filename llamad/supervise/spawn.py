"""Starting an instance's process, once the RPC workers it needs are up.

What the instance task asks when the machine says Spawn: launch now, or report which
workers are missing (the machine then waits for them) or why the launch failed.
"""

from __future__ import annotations

from llamad.backends.spec import InstanceSpec
from llamad.fleet.remote_workers import Found
from llamad.lifecycle.states import Event, SpawnFailed, WorkersMissing
from llamad.supervise.childlog import ChildLog
from llamad.supervise.hooks import InstanceHooks
from llamad.supervise.process import Child
from llamad.supervise.runtime import Runtime


async def spawn(
    spec: InstanceSpec,
    runtime: Runtime,
    hooks: InstanceHooks,
    log: ChildLog,
    found: Found | None,
    device: str | None = None,
) -> tuple[Child, Found] | Event:
    """Launch `spec`'s process: the child and the remote workers it was given, or the
    event that says why not. `found` is what a worker waiter last saw running; `device`
    where the gateway placed it."""
    if found is not None and list(found) != [f"{p}/{w}" for p, w in spec.remote_workers]:
        found = None  # found for the spec before a reload: look again
    missing = hooks.not_ready(spec.workers)
    # Remote workers are only known running from a waiter's fresh look (`found`).
    if spec.remote_workers and found is None:
        missing += [f"{p}/{w}" for p, w in spec.remote_workers]
    if missing:
        return WorkersMissing(tuple(missing))
    try:
        child = await runtime.launch(spec, log, found, device)
    except Exception as exc:  # housekeeping (port check, registry): this instance's error
        child = f"cannot start: {type(exc).__name__}: {exc}"
    if isinstance(child, str):
        return SpawnFailed(child)
    return child, found or {}


async def await_workers(
    spec: InstanceSpec, runtime: Runtime, hooks: InstanceHooks, log: ChildLog
) -> Found:
    """Wait until every worker `spec` needs runs; the remote ones found running."""
    # Polled, not subscribed: it runs only while a head waits, and 50 ms (0.5 s for
    # a peer) is well inside any model's load time.
    return await runtime.remote.wait(
        spec.remote_workers, lambda: not hooks.not_ready(spec.workers), log.mark
    )
