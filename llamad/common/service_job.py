"""What the daemon and `llamactl service` agree on about a launchd job: the variable the
plist sets so llamad knows launchd started it, and the line llamad leaves in the job's
log while it waits for a bad config to be fixed."""

from __future__ import annotations

from collections.abc import Mapping

SERVICE_ENV = "LLAMAD_SERVICE"
# llamad's exit status for a bad config: systemd's RestartPreventExitStatus names it.
EXIT_CONFIG = 2
WAITING = "waiting for a fixed config"
# Ends llamad's report of a bad config, before the WAITING line when there is one.
VALIDATE = "check it with: llamactl validate"


def under_launchd(environ: Mapping[str, str]) -> bool:
    """Whether launchd started this daemon from the plist `llamactl service` writes."""
    return environ.get(SERVICE_ENV) == "launchd"
