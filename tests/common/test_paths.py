"""common.paths: the XDG rule, in one place."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from llamad.common import paths
from llamad.daemon.tinymodel import demo_model_path
from llamad.service.common import resolve_config
from llamad.service.systemd import unit_path


@pytest.mark.parametrize(
    ("var", "where"),
    [
        ("XDG_CONFIG_HOME", paths.config_home),
        ("XDG_STATE_HOME", paths.state_home),
        ("XDG_DATA_HOME", paths.data_home),
        ("XDG_CACHE_HOME", paths.cache_home),
    ],
)
def test_relative_xdg_values_are_ignored(
    var: str, where: Callable[[], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Per the XDG spec a relative value is invalid: the default under HOME applies."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv(var, str(tmp_path / "abs"))
    assert where() == tmp_path / "abs" / "llamad"
    monkeypatch.setenv(var, "relative/dir")
    assert where().is_absolute()
    assert where().is_relative_to(tmp_path)


def test_every_caller_shares_the_rule(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The service's config default, the systemd unit and the demo model follow it too."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("LLAMAD_CONFIG", raising=False)
    environ = {"XDG_CONFIG_HOME": "rel"}
    assert resolve_config(None, environ) == tmp_path / ".config" / "llamad" / "llamad.toml"
    assert unit_path(tmp_path, environ) == tmp_path / ".config/systemd/user/llamad.service"
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))
    assert demo_model_path() == tmp_path / "data" / "llamad" / "tiny-llama.gguf"
