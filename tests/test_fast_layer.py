"""`make test-fast`'s layer: what starts a process is left out or skipped, nothing else."""

from __future__ import annotations

import fast_layer
import pytest


@pytest.mark.parametrize("event", sorted(fast_layer.SPAWN_EVENTS))
def test_every_way_to_start_a_process_skips_the_test(event: str) -> None:
    with pytest.raises(pytest.skip.Exception, match="starts a process"):
        fast_layer._refuse_spawns(event, ())


def test_other_audit_events_pass() -> None:
    for event in ("open", "socket.connect", "import", "subprocess.check_output"):
        fast_layer._refuse_spawns(event, ())


def test_the_spawning_fixtures_exist() -> None:
    """A renamed fixture would silently leave its tests in the layer until their spawn."""
    from pathlib import Path

    defined = "\n".join(p.read_text() for p in Path(__file__).parent.rglob("*.py"))
    missing = [name for name in fast_layer.SPAWNING if f"def {name}(" not in defined]
    assert missing == []
