"""Collaborators are given to constructors: no module wires one onto a built object.

An attribute is assigned on `self`, in a constructor, or on a record the function fills
(a tally, a slot, a table row): those receivers are listed per module below.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

PACKAGE = Path(__file__).parents[1] / "llamad"
CONSTRUCTORS = {"__init__", "__post_init__", "__new__"}

# Records filled field by field where they are made or measured; none holds a collaborator.
RECORDS: dict[str, set[str]] = {
    "api/library.py": {"refusal"},
    "backends/gguf_header.py": {"cur"},
    "cli/fleet_hosts.py": {"host"},
    "cli/main.py": {"args"},
    "config/resolve.py": {"ctx"},
    "daemon/logs.py": {"record"},
    "gateway/access/door.py": {"tally"},
    "gateway/books/activity_stats.py": {"usage"},
    "gateway/app.py": {"tally"},
    "gateway/leasing.py": {"tally"},
    "gateway/replicas/fleet_lease.py": {"tally"},
    "gateway/admission/drain.py": {"slot"},
    "gateway/fleet/models.py": {"entry"},
    "gateway/admission/idle.py": {"self.sched.slot(name)"},
    "gateway/ollama/answer.py": {"tally"},
    "gateway/ollama/endpoint.py": {"tally"},
    "gateway/ollama/stream.py": {"piece"},
    "upstream/pool.py": {"host", "conn"},
    "gateway/relay/proxy.py": {"tally"},
    "gateway/replicas/lease.py": {"tally", "held"},
    "gateway/routed.py": {"tally"},
    "gateway/shaping/live.py": {"tally"},
    "gateway/shaping/runner.py": {"tally"},
    "library/folder.py": {"found"},
    "library/hf_cache.py": {"found"},
    # The table's own marks on a connection it holds: the share it counts for.
    "listener/table.py": {"conn"},
    "supervise/process.py": {"prctl"},  # how ctypes declares a foreign function
    "supervise/slot_cache.py": {"done"},
    "supervise/slot_verdicts.py": {"judged"},
    "supervise/watch.py": {"inst"},
}


def _targets(node: ast.expr) -> Iterator[ast.expr]:
    if isinstance(node, ast.Tuple | ast.List):
        for element in node.elts:
            yield from _targets(element)
    elif isinstance(node, ast.Starred):
        yield from _targets(node.value)
    else:
        yield node


def _assigned(tree: ast.AST, function: str | None = None) -> Iterator[tuple[int, str]]:
    """(line, receiver) of every attribute assignment outside a constructor."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
            yield from _assigned(child, child.name)
            continue
        if function not in CONSTRUCTORS:
            if isinstance(child, ast.Assign | ast.AugAssign | ast.AnnAssign):
                whole = child.targets if isinstance(child, ast.Assign) else [child.target]
                for target in whole:
                    for one in _targets(target):
                        if isinstance(one, ast.Attribute):
                            yield child.lineno, ast.unparse(one.value)
            elif (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Name)
                and child.func.id == "setattr"
            ):
                yield child.lineno, ast.unparse(child.args[0])
        yield from _assigned(child, function)


def test_no_collaborator_is_assigned_onto_a_built_object() -> None:
    """Outside constructors, attributes are set on `self` or on a listed record only."""
    found = []
    used: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = path.relative_to(PACKAGE).as_posix()
        for line, receiver in _assigned(ast.parse(path.read_text(), str(path))):
            if receiver in ("self", "cls"):
                continue
            if receiver in RECORDS.get(module, set()):
                used.setdefault(module, set()).add(receiver)
                continue
            found.append(f"llamad/{module}:{line}: {receiver}")
    assert found == [], "assign through a constructor or a method of the object instead"
    assert used == RECORDS, "an allowed receiver is no longer assigned to: drop it"
