"""The running daemon as one object: what the reloader changes and the API reads."""

from __future__ import annotations

from dataclasses import dataclass, field

from llamad.config.load import Resolved
from llamad.supervise.hooks import ProbeFeed
from llamad.supervise.slot_checkpoints import Checkpoints
from llamad.supervise.supervisor import Supervisor


@dataclass
class DaemonState:
    """The resolved config, the supervisor, the last config error and the reload count.

    One per daemon. The reloader is its only writer (through `accepted` and `rejected`);
    the control API, the status document and the metrics read it.
    """

    resolved: Resolved
    supervisor: Supervisor
    # Every probe result, for whoever listens (the metrics, once the web stack has loaded).
    probes: ProbeFeed = field(default_factory=ProbeFeed)
    # The prompt cache's background saves, told by the gateway as requests end.
    saves: Checkpoints | None = None
    config_error: str | None = None
    reloads: int = 0

    def accepted(self, new: Resolved) -> None:
        """A reload applied `new`: it is the config now, and any earlier error is gone."""
        self.resolved = new
        self.config_error = None
        self.reloads += 1

    def rejected(self, lines: list[str]) -> None:
        """A reload found the file invalid: show why until the next good one."""
        self.config_error = "; ".join(lines)
