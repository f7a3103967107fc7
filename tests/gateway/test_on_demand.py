"""On-demand start, idle stop, queue limits and failed loads, with real llama-servers
(the fake one only where a load must be slow)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
from gateway_helpers import TINY, Gw, chat, gateway
from helpers import FAKE_SERVER, wait_for

LAZY = {**TINY, "on_demand": True}


async def _many(base: str, body: dict[str, object], n: int) -> list[httpx.Response]:
    async with httpx.AsyncClient(timeout=30) as client:
        url = f"{base}/v1/chat/completions"
        return await asyncio.gather(*(client.post(url, json=body) for _ in range(n)))


def test_concurrent_cold_requests_start_one_process(tiny_model: Path) -> None:
    with gateway(tiny_model, {"lazy": LAZY}) as gw:
        assert gw.state("lazy") == "stopped"
        replies = asyncio.run(_many(gw.base, chat("lazy"), 20))
        assert [r.status_code for r in replies] == [200] * 20
        assert gw.starts("lazy") == 1
        assert len(gw.ld.events("gateway.load_requested", model="lazy")) == 1


def test_idle_stop_then_next_request_loads_again(tiny_model: Path) -> None:
    with gateway(tiny_model, {"lazy": {**LAZY, "idle_timeout": 1.0}}) as gw:
        assert httpx.post(f"{gw.base}/v1/chat/completions", json=chat("lazy")).status_code == 200
        gw.ld.wait_event("instance.idle_stopped", instance="lazy")
        wait_for(lambda: gw.state("lazy") == "idle", 10, "lazy idle")
        status = gw.ld.ctl("status")
        assert status.returncode == 0, status.stdout
        assert "idle" in status.stdout
        assert gw.models()["lazy"]["llamad"]["state"] == "idle"
        assert httpx.post(f"{gw.base}/v1/chat/completions", json=chat("lazy")).status_code == 200
        assert gw.starts("lazy") == 2


def test_stop_by_a_person_unloads_and_a_request_loads_again(tiny_model: Path) -> None:
    with gateway(tiny_model, {"lazy": LAZY}) as gw:
        assert gw.ld.ctl("load", "lazy").returncode == 0
        assert gw.state("lazy") == "running"
        assert gw.ld.ctl("unload", "lazy").returncode == 0
        assert gw.state("lazy") == "stopped"
        assert gw.ld.ctl("status").returncode == 0  # on demand and not loaded is fine
        assert httpx.post(f"{gw.base}/v1/chat/completions", json=chat("lazy")).status_code == 200
        assert gw.state("lazy") == "running"


def test_a_model_that_fails_to_load_answers_503_with_the_reason(
    tiny_model: Path, tmp_path: Path
) -> None:
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF but not really" * 10)
    instances = {"tiny": TINY, "broken": {**LAZY, "model": broken}}
    with gateway(tiny_model, instances) as gw:
        reply = httpx.post(f"{gw.base}/v1/chat/completions", json=chat("broken"), timeout=30)
        assert reply.status_code == 503
        assert reply.headers["retry-after"]
        error = reply.json()["error"]
        assert error["code"] == "load_failed"
        assert "failed to load" in error["message"]
        assert "last output" in error["message"]  # llama-server's own words
        # ...without the model's path (a user's home, say): that stays in the log.
        assert "broken.gguf" in error["message"]
        assert str(tmp_path) not in error["message"]
        (failed,) = gw.ld.events("gateway.load_failed", model="broken")
        assert str(broken) in failed["reason"]
        wait_for(lambda: gw.state("broken") == "stopped", 10, "broken stopped, not retrying")
        assert httpx.post(f"{gw.base}/v1/chat/completions", json=chat("tiny")).status_code == 200


def test_429_past_max_queue_and_a_disconnect_while_loading(
    tiny_model: Path, llama_server: Path
) -> None:
    slow = {**LAZY, "env": {"FAKE_LOAD_SECONDS": "3"}}
    with gateway(
        tiny_model,
        {"slow": slow},
        env={"FAKE_REAL_SERVER": str(llama_server)},
        daemon={"llama_server": str(FAKE_SERVER)},
        max_queue=2,
    ) as gw:
        body = {"model": "slow", "prompt": "a"}

        async def scenario() -> list[int]:
            async with httpx.AsyncClient(timeout=30) as client:
                url = f"{gw.base}/v1/completions"
                # One waiter gives up while the model loads: it leaves the queue.
                quitter = asyncio.ensure_future(client.post(url, json=body))
                await asyncio.to_thread(gw.ld.wait_event, "gateway.load_requested")
                quitter.cancel()
                await asyncio.to_thread(
                    wait_for, lambda: _queued(gw, "slow") == 0, 10, "queue empty"
                )
                replies = await asyncio.gather(*(client.post(url, json=body) for _ in range(4)))
                return sorted(r.status_code for r in replies)

        codes = asyncio.run(scenario())
        assert codes == [200, 200, 429, 429]
        assert gw.starts("slow") == 1


def _queued(gw: Gw, model: str) -> int:
    return int(gw.ld.instance(model)["gateway"]["queued"])
