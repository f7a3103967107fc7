"""The copy-paste setups of docs/connect.md, run as written against a real gateway in
front of the tiny model named `qwen`: each snippet marked `<!-- run -->` is a shell
command (curl) or a Python script, with only the gateway's address changed."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from gateway_helpers import gateway

pytestmark = pytest.mark.timeout(120)

PAGE = Path(__file__).resolve().parents[2] / "docs" / "connect.md"
_RUN = re.compile(r"<!-- run -->\n```(\w+)\n(.*?)\n```", re.S)
DOCUMENTED = "http://127.0.0.1:8080"


def snippets() -> list[tuple[str, str]]:
    """(language, code) of each snippet the page marks to run."""
    return [(m.group(1), m.group(2)) for m in _RUN.finditer(PAGE.read_text())]


def test_the_page_marks_the_snippets_it_promises() -> None:
    kinds = [lang for lang, _ in snippets()]
    assert kinds.count("sh") == 1
    assert kinds.count("python") == 5  # openai, ollama, anthropic, litellm, langchain


def test_each_snippet_runs_as_written(tiny_model: Path, tmp_path: Path) -> None:
    """One gateway for all of them: each prints an answer and exits 0."""
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "NO_PROXY": "127.0.0.1"}
    failed = []
    with gateway(tiny_model, {"qwen": {"ctx_size": 256, "n_parallel": 1}}) as gw:
        for n, (lang, code) in enumerate(snippets()):
            code = code.replace(DOCUMENTED, gw.base)
            if lang == "sh":
                argv = ["sh", "-c", code]
            else:
                script = tmp_path / f"snippet{n}.py"
                script.write_text(code)
                argv = [sys.executable, str(script)]
            done = subprocess.run(argv, capture_output=True, text=True, timeout=90, env=env)
            if done.returncode != 0 or not done.stdout.strip():
                failed.append(f"{lang} snippet {n}: {done.stderr[-1500:]}")
    assert failed == []
