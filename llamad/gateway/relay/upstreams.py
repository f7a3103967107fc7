"""Where a leased request to a local instance goes, built once per spec and process.

Everything an `Upstream` holds follows from the instance's spec (its address, auth, how
its server names the model, how its backend wants the body) and its process id, so it is
made when either changes, not for every request.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from llamad.backends.probes import server_url
from llamad.backends.registry import backend_for
from llamad.backends.spec import InstanceSpec
from llamad.gateway.contract.port import Upstream
from llamad.gateway.relay.instance_auth import instance_auth
from llamad.supervise.facts import Facts


class Upstreams:
    """The `Upstream` of each local instance, remade when its spec or process changes."""

    def __init__(self, pid_of: Callable[[str], int | None]) -> None:
        self.pid_of = pid_of  # an instance's process now, as the supervisor sees it
        # Instance name -> (the spec it was made from, the upstream).
        self._made: dict[str, tuple[InstanceSpec, Upstream]] = {}

    def of(self, facts: Facts) -> Upstream:
        """The upstream of the instance `facts` describe, for its process now."""
        spec, made = self._made.get(facts.name, (None, None))
        if made is None or spec is not facts.spec:
            made = self._of_pid(_build(facts.spec), facts.pid)
        elif made.pid != facts.pid:  # restarted: the same spec, another process
            made = self._of_pid(made, facts.pid)
        else:
            return made
        self._made[facts.name] = (facts.spec, made)
        return made

    def _of_pid(self, made: Upstream, pid: int | None) -> Upstream:
        replaced = functools.partial(_replaced, self.pid_of, made.name, pid)
        return dataclasses.replace(made, pid=pid, replaced=replaced)


def _replaced(pid_of: Callable[[str], int | None], name: str, pid: int | None) -> bool:
    return pid_of(name) != pid


def _build(spec: InstanceSpec) -> Upstream:
    backend = backend_for(spec.kind)
    return Upstream(
        server_url(spec.probe_host, spec.port, ""),
        dict(instance_auth(spec)),
        spec.name,
        answer_name=backend.serving(spec).answer_name,
        model_path=spec.model,
        adapt=functools.partial(backend.request_body, spec),
        prompt=spec.prompt if spec.prompt is not None and spec.prompt.active else None,
    )
