"""The peer benchmark's helpers, without starting a peer: the load client's counting,
the concurrency rounds, local-engine-router's config, the reasons a peer is skipped, and
the fleet path's configs."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from counting_servers import counting_servers

from bench import concurrency, fleet_path, load_client, peer_nginx, peer_procs, peer_rows
from bench.common import Context, write_config
from bench.concurrency import summary
from bench.targets import Target
from llamad.config.load import load

EVENT = b'data: {"choices":[{"text":"%s","index":0}]}\n\n'


def test_a_token_is_an_event_with_text() -> None:
    assert load_client._tokens(EVENT % b"a") == 1
    assert load_client._tokens(EVENT % b"") == 0  # llama-server's last event
    assert load_client._tokens(b"data: [DONE]\n") == 0
    assert load_client._tokens(b": keep-alive\n") == 0


async def _serve(streams_done: bool) -> tuple[asyncio.Server, int]:
    """A server that answers every request with a 2-token SSE stream (or a cut one)."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
        await reader.readexactly(length)
        body = EVENT % b"a" + EVENT % b"b" + (b"data: [DONE]\n\n" if streams_done else b"")
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nConnection: close\r\n"
            b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


@pytest.mark.parametrize("done", [True, False])
async def test_the_load_client_counts_answers_tokens_and_cut_streams(done: bool) -> None:
    server, port = await _serve(done)
    async with server:
        spec = {"url": f"http://127.0.0.1:{port}", "model": "m", "clients": 3, "requests": 7,
                "tokens": 2, "stream": True}  # fmt: skip
        out = await load_client.run(spec)
    assert out.tokens == 14
    if done:
        assert (out.ok, dict(out.errors), len(out.ttft_ms)) == (7, {}, 7)
        figures = summary({**vars(out), "errors": dict(out.errors)})
        assert figures["errors"] == 0
        assert figures["ttft_p99_ms"] >= figures["ttft_p50_ms"] > 0
    else:
        assert (out.ok, dict(out.errors)) == (0, {"truncated": 7})


def test_the_router_never_looks_processes_up_by_name(tmp_path: Path) -> None:
    text = peer_procs.router_config(
        tmp_path, 9, "tiny", 8, ["llama-server"], {"A": "1"}
    ).read_text()
    assert "process_pattern" not in text
    assert "base_url: http://127.0.0.1:8\n" in text
    assert "routing_mode: manual\n" in text
    assert "host: 127.0.0.1\n" in text


def test_a_missing_peer_is_skipped_with_its_reason(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(peer_nginx.shutil, "which", lambda *a, **k: None)
    with pytest.raises(peer_procs.Unavailable, match="nginx not found"):
        peer_nginx.find_nginx()
    monkeypatch.setattr(peer_procs, "PEERS_VENV", tmp_path)
    with pytest.raises(peer_procs.Unavailable, match="make bench-peers"):
        peer_procs._peer_bin("litellm")


def test_the_fleet_paths_configs_are_ones_llamad_takes(tmp_path: Path) -> None:
    """The peer llamad's control on TCP and the front llamad's `[fleet]` peer, as the
    fleet path writes them, load with llamad's own config code."""
    ctx = Context(root=tmp_path, short=tmp_path, model=tmp_path / "m.gguf",
                  binary=tmp_path / "llama-server", quick=True)  # fmt: skip
    remote, read = fleet_path.remote_keys(ctx, 18123)
    work = tmp_path / "front"
    work.mkdir()
    peer = {"name": "peer", "url": "http://127.0.0.1:18123", "token_file": read}
    config = write_config(
        work / "llamad.toml",
        {},
        {"state_dir": work / "state", "remote": remote},
        gateway={"listen": "127.0.0.1:18124", "fleet": True},
        tables={"fleet": {"peers": [peer]}},
    )
    loaded = load(config)
    assert loaded.daemon.remote is not None
    assert loaded.daemon.remote.read_token == read.read_text().strip()
    assert [(p.name, p.url, p.token_file) for p in loaded.fleet.peers] == [
        ("peer", "http://127.0.0.1:18123", read)
    ]


@pytest.mark.parametrize(("clients", "judged"), [(8, False), (128, True)])
def test_the_judged_levels_give_the_compared_targets_more_rounds(
    tmp_path: Path, clients: int, judged: bool
) -> None:
    ctx = Context(root=tmp_path, short=tmp_path, model=tmp_path / "m.gguf",
                  binary=tmp_path / "llama-server", quick=False)  # fmt: skip
    names = ["direct", "llamad", "nginx", "litellm"]
    ran: list[str] = []

    def run(target: Target, model: str, clients: int, n: int) -> dict[str, object]:
        ran.append(target.name)
        wall = 1.0 + len(ran) / 100  # every run its own figure: the median is the middle
        return {"ok": n, "tokens": 16 * n, "wall_s": wall, "ttft_ms": [1.0, 2.0], "errors": {}}

    walls, seen = concurrency.rounds(ctx, [Target(n, {}) for n in names], "m", clients, 4, run)
    more = concurrency.JUDGED_ROUNDS if judged else concurrency.ROUNDS
    assert {n: len(w) for n, w in walls.items()} == {
        "direct": more, "llamad": more, "nginx": more, "litellm": concurrency.ROUNDS,
    }  # fmt: skip
    # Each round begins with another target: none always runs just after the same one.
    assert ran[:4] == names
    assert ran[4:8] == names[1:] + names[:1]
    assert all(seen[n]["wall_s"] == sorted(walls[n])[len(walls[n]) // 2] for n in names)


def test_each_peers_latency_is_taken_in_rounds_with_direct_and_llamad(tmp_path: Path) -> None:
    names = ["direct", "llamad", "nginx", "litellm"]
    with counting_servers(names) as (ports, seen):
        targets = [Target(n, {"m": f"http://127.0.0.1:{ports[n]}"}) for n in names]
        ctx = Context(root=tmp_path, short=tmp_path, model=tmp_path / "m.gguf",
                      binary=tmp_path / "llama-server", quick=True)  # fmt: skip
        rows = peer_rows.latency(ctx, targets[0], targets[1:], "m")
    per_group = ctx.reps(400, 100) + peer_rows.WARMUP
    counts = {n: seen.count(p) for n, p in ports.items()}
    # direct and llamad in both groups; each other peer only in its own.
    assert counts == {"direct": 2 * per_group, "llamad": 2 * per_group,
                      "nginx": per_group, "litellm": per_group}  # fmt: skip
    notes = {r.name: r.note for r in rows}
    assert set(notes) == {f"peers: {n} added latency p{q}" for n in names[1:] for q in (50, 99)}
    assert notes["peers: llamad added latency p50"].startswith("in rounds of direct, llamad, nginx")
    assert notes["peers: litellm added latency p99"].startswith(
        "in rounds of direct, llamad, litellm"
    )
