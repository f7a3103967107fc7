"""Dependencies are used through their public interfaces only, so none needs an upper
bound: no llamad module imports another package's private module or member, no llamad
class overrides a private method of another package's class, and pyproject.toml bounds
no requirement from above."""

from __future__ import annotations

import ast
import importlib
import inspect
import logging.handlers
import pkgutil
import tomllib
from collections.abc import Iterable, Iterator
from pathlib import Path

from packaging.requirements import Requirement

import llamad

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


def private_overrides(classes: Iterable[type]) -> Iterator[str]:
    """Each private method (`_x`) a class writes that a base class of another package
    (the standard library's included) defines: the base's internals, free to change."""
    for cls in classes:
        for name, value in vars(cls).items():
            if not name.startswith("_") or name.startswith("__"):
                continue
            method = getattr(value, "__func__", getattr(value, "fget", value))
            if getattr(method, "__qualname__", "").rpartition(".")[0] != cls.__qualname__:
                continue  # put there by a metaclass (enum's, typing's), not written here
            for base in cls.__mro__[1:]:
                if base.__module__.partition(".")[0] != "llamad" and name in vars(base):
                    theirs = f"{base.__module__}.{base.__qualname__}"
                    yield f"{cls.__qualname__}.{name} overrides {theirs}"


def llamad_classes() -> Iterator[type]:
    """Every class defined in a llamad module (`__main__` runs the daemon: left out)."""
    for info in pkgutil.walk_packages(llamad.__path__, "llamad."):
        if info.name.rpartition(".")[2] == "__main__":
            continue
        module = importlib.import_module(info.name)
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__:
                yield cls


def test_the_check_sees_private_overrides() -> None:
    class Quiet(logging.handlers.RotatingFileHandler):
        def _open(self) -> None:  # type: ignore[override]
            ...

        def _mine(self) -> None: ...

    assert list(private_overrides([Quiet])) == [
        "test_the_check_sees_private_overrides.<locals>.Quiet._open overrides logging.FileHandler"
    ]


def test_no_private_method_of_a_dependency_is_overridden() -> None:
    assert list(private_overrides(llamad_classes())) == []


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
