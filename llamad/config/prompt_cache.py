"""Where the prompt cache is kept and how much of the disk it may take (`[daemon]`
`prompt_cache`, `cache_dir`, `cache_max`; an instance's own `prompt_cache`)."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

from llamad.common import paths
from llamad.config.gateway_table import body_size
from llamad.config.schema import ConfigFile, InstanceTable


def cache_root(cfg: ConfigFile, base: Path) -> Path:
    """`cache_dir`, else `prompt-cache` in the state directory (relative to `base`)."""
    d = cfg.daemon
    if d.cache_dir:
        return paths.anchored(d.cache_dir, base)
    state = paths.anchored(d.state_dir, base) if d.state_dir else paths.state_home()
    return state / "prompt-cache"


def instance_cache(cfg: ConfigFile, base: Path, name: str, table: InstanceTable) -> Path | None:
    """The directory instance `name`'s slots are saved in, or None when it is turned off."""
    wanted = cfg.daemon.prompt_cache if table.prompt_cache is None else table.prompt_cache
    if not wanted:
        return None
    # A library model's name holds a `/`: one directory per instance, whatever its name.
    return cache_root(cfg, base) / quote(name, safe=":+")


def cache_max(value: str | None) -> int | None:
    """`cache_max` in bytes; None: the default, bounded by free space when it is used.
    Raises ValueError with the config line's message."""
    return None if value is None else body_size(value)
