"""Fixtures for the Ollama API: a stand-in gateway over real llama-servers, served on TCP."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import ollama
import pytest
from ollama_double import DoubleGateway, OllamaServer


@pytest.fixture
def gateway(llama_server: Path, tiny_model: Path) -> Iterator[DoubleGateway]:
    """Two models: `tiny` (always on, alias `tiny-alias`) and `lazy` (on demand, stopped)."""
    gw = DoubleGateway(llama_server, tiny_model)
    gw.add("tiny", aliases=("tiny-alias",))
    gw.add("lazy", on_demand=True)
    try:
        gw.start_now("tiny")
        yield gw
    finally:
        gw.close()


@pytest.fixture
def server(gateway: DoubleGateway) -> Iterator[OllamaServer]:
    """The Ollama routes over `gateway`, on a free port."""
    srv = OllamaServer(gateway)
    try:
        yield srv
    finally:
        srv.stop()


@pytest.fixture
def client(server: OllamaServer) -> Iterator[ollama.Client]:
    """Ollama's official client pointed at the server."""
    with ollama.Client(host=server.url, timeout=30) as c:
        yield c
