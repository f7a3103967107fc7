"""Which ggml/llama libraries an executable is watched through, for each install layout."""

from __future__ import annotations

import os
from pathlib import Path

from llamad.backends.linked_libs import linked_libraries


def touch(*paths: Path) -> None:
    for path in paths:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")


def test_a_cmake_install_loads_from_its_lib_folder(tmp_path: Path) -> None:
    binary, lib = tmp_path / "bin" / "llama-server", tmp_path / "lib"
    touch(binary, lib / "libggml-base.so.0.9.4", lib / "libllama.so", lib / "libssl.so")
    touch(lib / "libggml.a", lib / "README")
    assert linked_libraries(binary) == [lib / "libggml-base.so.0.9.4", lib / "libllama.so"]


def test_a_release_archive_loads_from_beside_the_executable(tmp_path: Path) -> None:
    binary = tmp_path / "llama-b6000" / "llama-server"
    touch(binary, binary.with_name("libggml-metal.dylib"), binary.with_name("libmtmd.dylib"))
    assert [p.name for p in linked_libraries(binary)] == ["libggml-metal.dylib", "libmtmd.dylib"]


def test_homebrew_ggml_is_its_own_formula_reached_through_opt(tmp_path: Path) -> None:
    """PREFIX/bin/llama-server -> ../Cellar/llama.cpp/V/bin/llama-server, which loads
    PREFIX/opt/ggml/lib/libggml*.dylib; opt/ggml -> ../Cellar/ggml/V."""
    prefix = tmp_path / "homebrew"
    real = prefix / "Cellar" / "llama.cpp" / "6000" / "bin" / "llama-server"
    ggml = prefix / "Cellar" / "ggml" / "0.9.4" / "lib"
    touch(real, real.parent.parent / "lib" / "libllama.dylib", ggml / "libggml-base.dylib")
    for link, target in (
        (prefix / "bin" / "llama-server", "../Cellar/llama.cpp/6000/bin/llama-server"),
        (prefix / "opt" / "ggml", "../Cellar/ggml/0.9.4"),
    ):
        link.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, link)
    expected = [
        real.parent.parent / "lib" / "libllama.dylib",
        prefix / "opt" / "ggml" / "lib" / "libggml-base.dylib",
    ]
    assert linked_libraries(prefix / "bin" / "llama-server") == expected
    assert linked_libraries(real) == expected  # configured by its Cellar path


def test_an_executable_alone_has_none(tmp_path: Path) -> None:
    binary = tmp_path / "bin" / "llama-server"
    touch(binary)
    assert linked_libraries(binary) == []
