"""Dependencies are used through their public interfaces only, so none needs an upper
bound: no llamad module imports another package's private module or member, and
pyproject.toml bounds no requirement from above."""

from __future__ import annotations

import ast
import tomllib
from collections.abc import Iterator
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[1]


def private_imports(source: str) -> Iterator[str]:
    """Each import of a private module or name (`_x`) of a package other than llamad."""
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] != "llamad" and any(p.startswith("_") for p in parts[1:]):
                yield name


def test_the_check_sees_private_imports() -> None:
    source = "import zeroconf._core\nfrom zeroconf._utils.net import x\nfrom h11 import _util\n"
    assert list(private_imports(source)) == [
        "zeroconf._core",
        "zeroconf._utils.net.x",
        "h11._util",
    ]
    assert list(private_imports("from llamad.x import _y\nfrom . import _z\nimport os\n")) == []


def test_no_private_module_or_member_of_a_dependency_is_imported() -> None:
    found = [
        f"{path.relative_to(ROOT)}: {name}"
        for path in sorted((ROOT / "llamad").rglob("*.py"))
        for name in private_imports(path.read_text(encoding="utf-8"))
    ]
    assert found == []


def test_pyproject_bounds_no_requirement_from_above() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    lines = [
        *project["project"]["dependencies"],
        *(r for extra in project["project"]["optional-dependencies"].values() for r in extra),
        *(r for group in project["dependency-groups"].values() for r in group),
    ]
    requirements = [Requirement(line) for line in lines if isinstance(line, str)]
    bounded = [str(r) for r in requirements for s in r.specifier if s.operator in ("<", "<=", "~=")]
    assert bounded == []
