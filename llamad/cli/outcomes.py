"""The lines a command prints once it played out: start, stop, restart and reload."""

from __future__ import annotations

from llamad.cli.table import problem

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def outcome(verb: str, doc: dict[str, Any]) -> tuple[bool, str] | None:
    """(succeeded, line) once `verb` has played out on the instance `doc`; None if it has not.

    llamad answers a waited-for command only once the instance left the state it was in,
    so start and restart aim at running; stop at stopped, which a failed instance also
    satisfies: it has no process either.
    """
    name, state, pid = doc.get("name"), doc.get("state"), doc.get("pid")
    if verb == "stop" and state in ("stopped", "failed"):
        return True, f"{name}: {state}" + (" (not running)" if state == "failed" else "")
    if verb != "stop" and state == "running":
        return True, f"{name}: running (pid {pid})"
    if verb != "stop" and state == "failed":
        return False, f"{name}: failed: {problem(doc) or 'no error recorded'}"
    return None


def timed_out(doc: dict[str, Any]) -> str:
    """The line for an instance that did not get there in time."""
    why = problem(doc)
    return f"{doc.get('name')}: timed out in state {doc.get('state')}" + (f": {why}" if why else "")


def reload_lines(report: dict[str, Any]) -> list[str]:
    """`added: a, b` for each non-empty kind of change, or `no changes`; then `draining:`
    the models still finishing their requests before they stop or restart."""
    kinds = ("added", "changed", "removed", "unchanged", "draining")
    lines = [f"{kind}: {', '.join(report[kind])}" for kind in kinds if report.get(kind)]
    if not any(report.get(kind) for kind in kinds[:3]):
        lines.insert(0, "no changes")
    return lines
