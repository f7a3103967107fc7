"""The symlinks a path resolves through: what a swap made elsewhere changes under it.

A file can be a link that never changes itself while a link it leads through is
swapped: a Kubernetes ConfigMap renames a new `..data` link over the old one, NixOS
re-points `/etc/static`, Nix home-manager a link in the home directory.
"""

from __future__ import annotations

import os
from pathlib import Path

# Linux's own bound on the links one path may resolve through (ELOOP past it).
MAX_LINKS = 40


def links(path: Path) -> list[Path]:
    """The symlinks `path` resolves through, in the order they are followed (`path`
    itself first when it is one), as the kernel follows them: `..` after a link goes up
    from where the link led."""
    path = path.absolute()
    found: list[Path] = []
    here, todo = Path(path.anchor), list(path.parts[1:])
    while todo:
        part = todo.pop(0)
        if part == "..":
            here = here.parent
            continue
        step = here / part
        try:
            target = Path(os.readlink(step))
        except OSError:  # not a link, or gone meanwhile: taken as it is
            here = step
            continue
        if len(found) == MAX_LINKS:
            break
        found.append(step)
        if target.is_absolute():
            here, todo[:0] = Path(target.anchor), target.parts[1:]
        else:
            todo[:0] = target.parts
    return found
