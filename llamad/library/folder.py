"""Models in a plain folder (`~/models`, LM Studio's): each GGUF file is one, split files
count once, and vision projectors attach to the models beside them."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

from llamad.library.check import FileCheck, check_file
from llamad.library.model import Found, LibraryModel
from llamad.library.names import file_model_name, is_projector_name, quant_of, split_part
from llamad.library.walk import gguf_files

# Which projector to attach when a folder has several: the one llama.cpp's own repos ship
# by default first.
_PROJECTOR_PREFERENCE = ("f16", "bf16", "q8_0", "f32")


def scan_folder(root: Path, source: str) -> Found:
    """Every model under `root`, named from its file."""
    walk = gguf_files(root)
    found = Found(warnings=walk.warnings)
    by_dir: dict[Path, list[tuple[Path, FileCheck]]] = defaultdict(list)
    for path in walk.files:
        by_dir[path.parent].append((path, check_file(path)))
    for files in by_dir.values():
        found.models += group_models(files, source, found.warnings)
    return found


def group_models(
    files: list[tuple[Path, FileCheck]], source: str, warnings: list[str]
) -> list[LibraryModel]:
    """The models among the files of one folder: split parts joined, a projector attached
    to every model beside it, each named from its file."""
    projectors = [p for p, c in files if c.projector or is_projector_name(_stem(p))]
    mmproj = _preferred(projectors)
    groups: dict[str, list[tuple[int, int, Path, FileCheck]]] = defaultdict(list)
    for path, check in files:
        if path in projectors:
            continue
        split = split_part(_stem(path))
        base, part, count = split if split else (_stem(path), 1, 1)
        groups[base].append((part, count, path, check))
    models = []
    for base, parts in sorted(groups.items()):
        name = file_model_name(base)
        if name is None:
            warnings.append(f"{str(parts[0][2])!r}: no usable model name in the file name; skipped")
            continue
        parts.sort()
        first = parts[0][2]
        problem = _parts_problem(parts) or next((c.problem for *_, c in parts if c.problem), None)
        mm = mmproj if mmproj is not None and check_file(mmproj).problem is None else None
        size = sum(c.size for *_, c in parts) + (check_file(mm).size if mm else 0)
        models.append(
            LibraryModel(
                name=name,
                source=source,
                path=first,
                parts=tuple(p for _, _, p, _ in parts),
                mmproj=mm,
                size=size,
                quant=quant_of(base),
                problem=problem,
            )
        )
    return models


def _parts_problem(parts: list[tuple[int, int, Path, FileCheck]]) -> str | None:
    count = parts[0][1]
    have = {p for p, *_ in parts}
    missing = [str(i) for i in range(1, count + 1) if i not in have]
    if missing:
        return f"split model with parts {', '.join(missing)} of {count} missing"
    return None


def _preferred(projectors: list[Path]) -> Path | None:
    def rank(path: Path) -> tuple[int, str]:
        low = path.name.lower()
        hits = [i for i, q in enumerate(_PROJECTOR_PREFERENCE) if q in low]
        return (hits[0] if hits else len(_PROJECTOR_PREFERENCE), path.name)

    return min(projectors, key=rank) if projectors else None


def _stem(path: Path) -> str:
    return path.name[: -len(".gguf")] if path.name.lower().endswith(".gguf") else path.stem
