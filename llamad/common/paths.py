"""Where llamad keeps things by default, following the XDG base directories.

The same layout is used on macOS: a Mac user running llamad from a terminal or launchd
finds it under the home directory, and the paths stay short enough for AF_UNIX (104 bytes).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def xdg_base(
    var: str, fallback: str, environ: Mapping[str, str] | None = None, home: Path | None = None
) -> Path:
    """The XDG base directory `$var`, else `home/fallback` (home: the user's).

    The spec says a relative value is invalid and must be ignored: it would depend on the
    current directory, which for a launchd or systemd job is not the user's.
    """
    value = (os.environ if environ is None else environ).get(var, "")
    if os.path.isabs(value):
        return Path(value)
    return (Path.home() if home is None else home) / fallback


def config_home(environ: Mapping[str, str] | None = None) -> Path:
    """`$XDG_CONFIG_HOME/llamad`, by default `~/.config/llamad`."""
    return xdg_base("XDG_CONFIG_HOME", ".config", environ) / "llamad"


def state_home() -> Path:
    """`$XDG_STATE_HOME/llamad`, by default `~/.local/state/llamad`: socket, logs, lock."""
    return xdg_base("XDG_STATE_HOME", ".local/state") / "llamad"


def data_home() -> Path:
    """`$XDG_DATA_HOME/llamad`, by default `~/.local/share/llamad`: the demo model."""
    return xdg_base("XDG_DATA_HOME", ".local/share") / "llamad"


def cache_home() -> Path:
    """`$XDG_CACHE_HOME/llamad`, by default `~/.cache/llamad`: the llama-server catalogue."""
    return xdg_base("XDG_CACHE_HOME", ".cache") / "llamad"


def default_config(environ: Mapping[str, str] | None = None) -> Path:
    """The config file: `$LLAMAD_CONFIG`, else `config_home()/llamad.toml`."""
    env = (os.environ if environ is None else environ).get("LLAMAD_CONFIG")
    return Path(env).expanduser() if env else config_home(environ) / "llamad.toml"


def anchored(value: str | Path, base: Path) -> Path:
    """A path from a config file: `~` expanded, and a relative one taken from `base`, the
    file's directory, so the file means the same under launchd (cwd /) as in a shell."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else base.absolute() / path


def default_socket() -> Path:
    """The control socket when the config names none."""
    return state_home() / "llamad.sock"


def demo_state() -> Path:
    """Where `llamad --demo` keeps its state (and its control socket)."""
    return data_home() / "demo-state"
