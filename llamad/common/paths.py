"""Where llamad keeps things by default, following the XDG base directories.

The same layout is used on macOS: a Mac user running llamad from a terminal or launchd
finds it under the home directory, and the paths stay short enough for AF_UNIX (104 bytes).
"""

from __future__ import annotations

import os
from pathlib import Path


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    return Path(value) if value else Path.home() / fallback


def config_home() -> Path:
    """`$XDG_CONFIG_HOME/llamad`, by default `~/.config/llamad`."""
    return _xdg("XDG_CONFIG_HOME", ".config") / "llamad"


def state_home() -> Path:
    """`$XDG_STATE_HOME/llamad`, by default `~/.local/state/llamad`: socket, logs, lock."""
    return _xdg("XDG_STATE_HOME", ".local/state") / "llamad"


def data_home() -> Path:
    """`$XDG_DATA_HOME/llamad`, by default `~/.local/share/llamad`: the demo model."""
    return _xdg("XDG_DATA_HOME", ".local/share") / "llamad"


def cache_home() -> Path:
    """`$XDG_CACHE_HOME/llamad`, by default `~/.cache/llamad`: the llama-server catalogue."""
    return _xdg("XDG_CACHE_HOME", ".cache") / "llamad"


def default_config() -> Path:
    """The config file: `$LLAMAD_CONFIG`, else `config_home()/llamad.toml`."""
    env = os.environ.get("LLAMAD_CONFIG")
    return Path(env).expanduser() if env else config_home() / "llamad.toml"


def default_socket() -> Path:
    """The control socket when the config names none."""
    return state_home() / "llamad.sock"


def demo_state() -> Path:
    """Where `llamad --demo` keeps its state (and its control socket)."""
    return data_home() / "demo-state"
