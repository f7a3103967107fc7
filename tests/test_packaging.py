"""The sdist: one version, an SPDX licence with its file, and everything `make test` reads."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from email.parser import HeaderParser
from pathlib import Path

import pytest

from llamad import __version__

ROOT = Path(__file__).parents[1]


@pytest.fixture(scope="module")
def sdist(tmp_path_factory: pytest.TempPathFactory) -> tarfile.TarFile:
    out = tmp_path_factory.mktemp("dist")
    # The build backend pyproject.toml names, in-process as a frontend would call it.
    code = f"from setuptools import build_meta as b; print(b.build_sdist({str(out)!r}))"
    run = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr[-2000:]
    return tarfile.open(out / run.stdout.splitlines()[-1])


def test_sdist_metadata(sdist: tarfile.TarFile) -> None:
    """Version from llamad.__version__, `License-Expression: MIT`, classifiers."""
    top = f"llamad-{__version__}"
    member = sdist.extractfile(f"{top}/PKG-INFO")
    assert member is not None
    meta = HeaderParser().parsestr(member.read().decode())
    assert meta["Version"] == __version__
    assert meta["License-Expression"] == "MIT"
    assert "LICENSE" in meta.get_all("License-File", [])
    assert "Operating System :: MacOS" in meta.get_all("Classifier", [])


def test_sdist_carries_what_the_tests_read(sdist: tarfile.TarFile) -> None:
    names = {n.split("/", 1)[1] for n in sdist.getnames() if "/" in n}
    for needed in (
        "LICENSE",
        "Makefile",
        "etc/llamad.example.toml",
        "etc/llamad.minimal.toml",
        "etc/llamad.schema.json",
        "tests/conftest.py",
        "tests/helpers.py",
        "llamad/templates/llamad.service",
        "deploy/kubernetes/base/kustomization.yaml",
        "deploy/Containerfile",
    ):
        assert needed in names
    assert any(n.startswith("launchd/") for n in names)
    assert not any("__pycache__" in n for n in names)
