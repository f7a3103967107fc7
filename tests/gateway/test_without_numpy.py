"""llamad runs without `gguf` and numpy (the demo and test extras bring them): its own
scanner reads GGUF headers for the listings and the memory estimates."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
from gateway_helpers import TINY, gateway

# Put first on PYTHONPATH, this makes importing either package fail in that interpreter.
BLOCKER = """
import importlib.abc
import sys


class _Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in ("gguf", "numpy"):
            raise ModuleNotFoundError(f"No module named {name!r} (blocked)", name=name)
        return None


sys.meta_path.insert(0, _Blocked())
"""

# Every llamad module imports; the scanner reads the tiny model's header.
PROBE = """
import importlib, pkgutil, sys
import llamad
from llamad.backends.gguf_meta import read_gguf_meta

for mod in pkgutil.walk_packages(llamad.__path__, "llamad."):
    if not mod.name.endswith("__main__"):
        importlib.import_module(mod.name)
meta = read_gguf_meta(__import__("pathlib").Path(sys.argv[1]))
print(meta.quantization, meta.parameter_count)
"""


def _blocked_env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "sitecustomize.py").write_text(BLOCKER)
    return {"PYTHONPATH": str(tmp_path)}


def test_the_blocker_blocks(tmp_path: Path) -> None:
    """The check below proves something: numpy cannot be imported under the blocker."""
    done = subprocess.run(
        [sys.executable, "-c", "import numpy"],
        env=_blocked_env(tmp_path),
        capture_output=True,
        timeout=30,
    )
    assert done.returncode == 1
    assert b"(blocked)" in done.stderr


def test_every_module_imports_and_reads_a_header_without_numpy(
    tmp_path: Path, tiny_model: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tiny_model)],
        env=_blocked_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    quantization, parameters = done.stdout.split()
    assert quantization != "unknown"
    assert int(parameters) > 0


def test_the_daemon_lists_and_estimates_a_gguf_without_numpy(
    tmp_path: Path, tiny_model: Path
) -> None:
    """Config load, the gateway's listings and the memory estimate of a model not loaded."""
    with gateway(tiny_model, {"lazy": {**TINY, "on_demand": True}}, _blocked_env(tmp_path)) as gw:
        tags = httpx.get(f"{gw.base}/api/tags", timeout=5).json()["models"]
        (tag,) = [t for t in tags if t["name"] in ("lazy", "lazy:latest")]
        assert tag["details"]["quantization_level"] not in ("", "unknown")
        assert tag["size"] > 0
        assert "lazy" in gw.models()
        assert gw.ld.instance("lazy")["gateway"]["estimate_bytes"] > 0
        assert gw.state("lazy") == "stopped"
