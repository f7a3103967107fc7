"""deploy/Containerfile, checked as far as can be without a container engine or a
registry: it starts from llama.cpp's server image, copies files that exist and are
enough to build llamad, and runs `llamad` as the user and on the ports the manifests use."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from kube_manifests import ROOT, documents, one

CONTAINERFILE = ROOT / "deploy" / "Containerfile"


def instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments), continuation lines joined, comments left out."""
    found: list[tuple[str, str]] = []
    pending = ""
    for line in CONTAINERFILE.read_text(encoding="utf-8").splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        pending += line.rstrip().removesuffix("\\") + " "
        if not line.rstrip().endswith("\\"):
            word, _, rest = pending.strip().partition(" ")
            found.append((word.upper(), rest.strip()))
            pending = ""
    assert not pending, "a continuation runs off the end"
    return found


def arguments(instruction: str) -> list[str]:
    (rest,) = [r for w, r in instructions() if w == instruction]
    words = json.loads(rest) if rest.startswith("[") else shlex.split(rest)
    assert isinstance(words, list)
    return [str(w) for w in words]


def copied() -> list[tuple[list[str], str]]:
    """Each COPY's sources and destination."""
    return [(rest.split()[:-1], rest.split()[-1]) for w, rest in instructions() if w == "COPY"]


def test_built_on_llama_cpps_server_image() -> None:
    """One stage, FROM the BASE argument, whose default is llama.cpp's server image."""
    parsed = instructions()
    assert [w for w, _ in parsed].count("FROM") == 1
    assert ("FROM", "${BASE}") in parsed
    base = next(r for w, r in parsed if w == "ARG" and r.startswith("BASE="))
    assert base == "BASE=ghcr.io/ggml-org/llama.cpp:server"


def test_entrypoint_is_llamad_as_the_manifests_run_it() -> None:
    """`llamad`, as the DaemonSet's user, with the config the ConfigMap mounts, on the
    ports its container names."""
    assert arguments("ENTRYPOINT") == ["llamad"]
    assert arguments("CMD")[:2] == ["--config", "/etc/llamad/llamad.toml"]
    daemonset = one(
        documents((ROOT / "deploy/kubernetes/base/daemonset.yaml").read_text()),
        "DaemonSet",
        "llamad",
    )
    pod = daemonset["spec"]["template"]["spec"]
    uid, gid = arguments("USER")[0].split(":")
    assert (int(uid), int(gid)) == (
        pod["securityContext"]["runAsUser"],
        pod["securityContext"]["runAsGroup"],
    )
    (container,) = pod["containers"]
    ports = sorted(str(p["containerPort"]) for p in container["ports"])
    assert sorted(arguments("EXPOSE")) == ports
    assert container["args"] == arguments("CMD")


def test_copies_files_that_exist() -> None:
    for sources, destination in copied():
        assert destination.startswith("/")
        for source in sources:
            assert (ROOT / source).exists(), source


@pytest.mark.timeout(180)
def test_what_it_copies_builds_llamad(tmp_path: Path) -> None:
    """The files the COPY lines take are enough for a wheel with llamad's entry points and
    package data (what `pip install /src` builds in the image)."""
    src = tmp_path / "src"
    src.mkdir()
    for sources, _ in copied():
        for source in sources:
            origin = ROOT / source
            if origin.is_dir():
                shutil.copytree(origin, src / source, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                shutil.copy2(origin, src / source)
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation",
         "-w", str(tmp_path / "out"), str(src)],
        check=True, timeout=170, capture_output=True,
    )  # fmt: skip
    (wheel,) = (tmp_path / "out").glob("llamad-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "llamad/daemon/entry.py" in names
    assert any(n.startswith("llamad/gateway/page/static/") for n in names)
    (entry_points,) = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
    text = zipfile.ZipFile(wheel).read(entry_points).decode()
    assert "llamad = llamad.daemon.entry:main" in text
