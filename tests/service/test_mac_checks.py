"""The launchd pitfalls `service install` warns about, as tables: protected folders and
what in a config talks to the local network."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from llamad.service.mac_checks import lan_uses, protected_folder, protected_warnings

HOME = Path("/Users/you")


@pytest.mark.parametrize(
    ("path", "folder"),
    [
        (HOME / "Documents" / "llamad.toml", "~/Documents"),
        (HOME / "Downloads" / "m.gguf", "~/Downloads"),
        (HOME / "Desktop", "~/Desktop"),
        (
            HOME / "Library" / "Mobile Documents" / "com~apple~CloudDocs" / "m.gguf",
            "~/Library/Mobile Documents",
        ),
        (Path("/Volumes/External/models"), "/Volumes"),
        (HOME / "models" / "m.gguf", None),
        (HOME / "DocumentsArchive" / "m.gguf", None),
        (HOME / "Library" / "Application Support" / "x", None),
        (Path("/opt/homebrew/bin/llama-server"), None),
    ],
)
def test_protected_folder(path: Path, folder: str | None) -> None:
    assert protected_folder(path, HOME) == folder


def test_every_path_the_daemon_uses_is_checked() -> None:
    data = {
        "daemon": {"state_dir": "~/Desktop/state", "llama_server": "/Volumes/x/llama-server"},
        "instances": {"a": {"model": "../Downloads/a.gguf"}, "b": {"model": "llama3.2:3b"}},
        "library": {"dirs": [str(HOME / "Library/Mobile Documents/models")], "pull_dir": "/srv"},
    }
    config = HOME / "conf" / "llamad.toml"
    venv = HOME / "Documents" / "venv" / "bin" / "llamad"
    warned = [w.split(" is under ")[0] for w in protected_warnings(data, config, venv, HOME)]
    assert warned == [
        "llamad's install",
        "[daemon] llama_server",
        "instance a's model",
        "a [library] folder",
    ]


def test_state_dir_under_the_desktop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HOME", str(HOME))
    data = {"daemon": {"state_dir": "~/Desktop/state"}}
    [warning] = protected_warnings(data, Path("/etc/llamad.toml"), Path("/opt/bin/llamad"), HOME)
    assert warning.startswith("[daemon] state_dir is under ~/Desktop (/Users/you/Desktop/state)")


@pytest.mark.parametrize(
    ("data", "uses"),
    [
        ({}, []),
        ({"gateway": {"listen": "127.0.0.1:8080"}}, []),
        ({"gateway": {"listen": "[::1]:8080"}}, []),
        ({"gateway": {"listen": "localhost:8080"}}, []),
        ({"gateway": {"listen": "0.0.0.0:8080"}}, ["[gateway] listening beyond loopback"]),
        (
            {"daemon": {"remote": {"listen": "192.168.1.5:7777"}}},
            ["[daemon.remote] listening beyond loopback"],
        ),
        ({"fleet": {"peers": [{"url": "http://127.0.0.1:7777"}]}}, []),
        ({"fleet": {"peers": [{"url": "https://mini.local:7777"}]}}, ["fleet peers"]),
        ({"fleet": {"discover": True}}, ["mDNS discovery"]),
        ({"instances": {"h": {"rpc": ["w1", "127.0.0.1:50052"]}}}, []),
        ({"instances": {"h": {"rpc": ["10.0.0.2:50052"]}}}, ["instance h's RPC workers"]),
        ({"instances": {"h": {"rpc": ["mini/w1"]}}}, ["instance h's RPC workers"]),
        ({"instances": {"h": {"host": "0.0.0.0"}}}, ["instance h listening beyond loopback"]),
        ({"fleet": "not a table", "instances": ["nor", "this"]}, []),
    ],
)
def test_lan_uses(data: dict[str, Any], uses: list[str]) -> None:
    assert lan_uses(data) == uses
