"""Memory per device end to end: the daemon lists the devices through a stand-in
llama-server (recorded `--list-devices`, the real server otherwise), sizes the models
from `memory_estimate`, evicts from the device that needs room and refuses what fits on
none. The real tiny model runs on the CPU; only the sizes are made up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import device_stand_ins as si
import httpx
from gateway_helpers import TINY, Gw, chat, gateway
from helpers import wait_for

from llamad.client.http import Client

G = 1024**3


def lazy(device: str, size: str) -> dict[str, Any]:
    return {**TINY, "on_demand": True, "device": device, "memory_estimate": size}


def _ask(gw: Gw, model: str) -> httpx.Response:
    return httpx.post(f"{gw.base}/v1/chat/completions", json=chat(model), timeout=30)


def _evicted(gw: Gw) -> list[str]:
    return [e["instance"] for e in gw.ld.events("gateway.evicted")]


def _devices(gw: Gw) -> dict[str, dict[str, Any]]:
    return {d["name"]: d for d in gw.ld.status()["gateway"]["devices"]}


def test_a_gpu_that_needs_room_evicts_from_itself_alone(
    tiny_model: Path, llama_server: Path, tmp_path: Path
) -> None:
    server = si.stand_in_server(tmp_path / "llama-server", llama_server, si.CUDA)
    instances = {
        "a": lazy("CUDA0", "12GiB"),
        "b": lazy("CUDA1", "8GiB"),
        "c": lazy("CUDA0", "12GiB"),
        "huge": lazy("CUDA0", "30GiB"),
    }
    with gateway(tiny_model, instances, daemon={"llama_server": str(server)}) as gw:
        devices = wait_for(lambda: _devices(gw) or None, 10, "the devices listed")
        # 23500 MiB free, less the margin (2 GiB): what CUDA0 gives models.
        assert devices["CUDA0"]["budget_bytes"] == (23500 - 2048) * 1024**2

        assert _ask(gw, "a").status_code == 200
        assert _ask(gw, "b").status_code == 200
        assert _evicted(gw) == []
        assert _ask(gw, "c").status_code == 200  # CUDA0 cannot hold a and c
        assert _evicted(gw) == ["a"]  # b, on CUDA1, stays
        assert (gw.state("a"), gw.state("b"), gw.state("c")) == ("idle", "running", "running")

        devices = _devices(gw)
        assert devices["CUDA0"]["models"] == {"c": 12 * G}
        assert devices["CUDA1"]["models"] == {"b": 8 * G}
        assert devices["CUDA0"]["used_bytes"] == 12 * G
        shown = gw.ld.ctl("status")
        assert shown.returncode == 0
        line = next(ln for ln in shown.stdout.splitlines() if ln.strip().startswith("CUDA0"))
        assert "NVIDIA GeForce RTX 4090" in line
        assert "used 12G" in line
        assert "c 12G" in line
        assert any(
            ln.strip().startswith("CUDA1") and "b 8" in ln for ln in shown.stdout.splitlines()
        )
        # The metrics and the page have them too.
        with Client(gw.ld.socket).stream("/metrics", timeout=5) as chunks:
            text = b"".join(chunks).decode()
        assert 'llamad_gateway_device_used_bytes{device="CUDA0"} 1.2884901888e+10' in text
        assert 'llamad_gateway_device_budget_bytes{device="CUDA1"}' in text
        page = httpx.get(f"{gw.base}/ui/api/status", timeout=5).json()["gateway"]
        assert {d["name"]: d["models"] for d in page["devices"]} == {
            "CUDA0": {"c": 12 * G},
            "CUDA1": {"b": 8 * G},
        }

        # No device can hold 30 GiB: refused at once, in each API family's shape.
        refused = _ask(gw, "huge")
        assert refused.status_code == 507
        error = refused.json()["error"]
        assert error["code"] == "insufficient_memory"
        assert "needs 30.0 GiB on CUDA0" in error["message"]
        assert "what would fit: CUDA0 " in error["message"]
        anthropic = httpx.post(
            f"{gw.base}/v1/messages",
            json={
                "model": "huge",
                "max_tokens": 3,
                "messages": [{"role": "user", "content": "hi"}],
            },
            timeout=30,
        )
        assert anthropic.status_code == 507
        assert "needs 30.0 GiB" in anthropic.json()["error"]["message"]
        ollama = httpx.post(
            f"{gw.base}/api/chat",
            json={
                "model": "huge",
                "messages": [{"role": "user", "content": "hi"}],
                "stream": False,
            },
            timeout=30,
        )
        assert ollama.status_code == 507
        assert "needs 30.0 GiB" in ollama.json()["error"]
        assert _evicted(gw) == ["a"]  # the refusal stopped nothing
        assert gw.starts("huge") == 0  # never started
        assert gw.ld.events("gateway.no_room", model="huge")


def test_a_mac_refuses_a_model_over_metals_working_set(
    tiny_model: Path, llama_server: Path, tmp_path: Path
) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    server = si.stand_in_server(bin_dir / "llama-server", llama_server, si.METAL)
    si.stand_in_sysctl(bin_dir, {"hw.memsize": str(16 * G)})  # 16 GiB, no wired limit set
    instances = {"small": lazy("Metal", "4GiB"), "big": lazy("Metal", "12GiB")}
    env = {"PATH": si.path_with(bin_dir)}
    with gateway(tiny_model, instances, env=env, daemon={"llama_server": str(server)}) as gw:
        metal = wait_for(lambda: _devices(gw).get("Metal"), 10, "Metal listed")
        assert metal["total_bytes"] == 10923 * 1024**2  # 10.7 GiB
        refused = _ask(gw, "big")
        assert refused.status_code == 507
        message = refused.json()["error"]["message"]
        assert message.startswith("model 'big' needs 12.0 GiB on Metal, which has room for 9.6 GiB")
        assert _ask(gw, "small").status_code == 200
        assert _devices(gw)["Metal"]["models"] == {"small": 4 * G}


def test_a_model_the_config_does_not_place_goes_where_there_is_room(
    tiny_model: Path, llama_server: Path, tmp_path: Path
) -> None:
    seen = tmp_path / "seen"
    server = si.stand_in_server(tmp_path / "llama-server", llama_server, si.CUDA, seen)

    def free(size: str) -> dict[str, Any]:  # no `device`: the gateway chooses
        return {**TINY, "on_demand": True, "memory_estimate": size}

    instances = {"x": lazy("CUDA0", "18GiB"), "b": free("8GiB"), "c": free("12GiB")}
    with gateway(tiny_model, instances, daemon={"llama_server": str(server)}) as gw:
        wait_for(lambda: _devices(gw) or None, 10, "the devices listed")
        # Budgets: CUDA0 20.9 GiB, CUDA1 10.5 GiB. `x` is on CUDA0 as its config says;
        # `b` fits CUDA1 alone (spread over both, it would need 5.3 GiB of CUDA0's 2.9
        # left, and evict `x`).
        assert _ask(gw, "x").status_code == 200
        assert _ask(gw, "b").status_code == 200
        assert _evicted(gw) == []
        assert seen.read_text().splitlines() == ["CUDA0", "CUDA1"]
        devices = _devices(gw)
        assert devices["CUDA0"]["models"] == {"x": 18 * G}
        assert devices["CUDA1"]["models"] == {"b": 8 * G}
        assert gw.ld.instance("b")["gateway"]["placed"] == "CUDA1"
        assert gw.ld.instance("x")["gateway"]["placed"] is None
        assert gw.ld.events("gateway.placed", model="b", device="CUDA1")

        # `c` fits neither GPU now, nor spread: CUDA0 can make room by evicting `x` alone.
        assert _ask(gw, "c").status_code == 200
        assert _evicted(gw) == ["x"]
        assert seen.read_text().splitlines() == ["CUDA0", "CUDA1", "CUDA0"]
        assert _devices(gw)["CUDA0"]["models"] == {"c": 12 * G}
        assert gw.state("b") == "running"


def test_a_reload_naming_another_llama_server_lists_the_devices_again(
    tiny_model: Path, llama_server: Path, tmp_path: Path
) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first = si.stand_in_server(tmp_path / "a" / "llama-server", llama_server, si.CUDA)
    second = si.stand_in_server(tmp_path / "b" / "llama-server", llama_server, si.ROCM)
    instances = {"m": {**TINY, "on_demand": True, "memory_estimate": "1GiB"}}
    with gateway(tiny_model, instances, daemon={"llama_server": str(first)}) as gw:
        wait_for(lambda: _devices(gw) or None, 10, "the devices listed")
        assert sorted(_devices(gw)) == ["CUDA0", "CUDA1"]
        config = gw.ld.config
        config.write_text(config.read_text().replace(str(first), str(second)))
        gw.ld.wait_event("config.reloaded", timeout=30)
        assert _ask(gw, "m").status_code == 200  # the load decides with the new listing
        assert sorted(_devices(gw)) == ["ROCm0"]
        assert gw.ld.events("devices.relisted")
        assert _devices(gw)["ROCm0"]["models"] == {"m": G}


# Another program holds all of CUDA0 (nvidia-smi and the listing say 0 MiB free).
BUSY_GPUS = "0, NVIDIA GeForce RTX 4090, 24564, 0\n1, NVIDIA GeForce RTX 3060, 12288, 12000\n"
BUSY_LISTING = si.HEAD + (
    "  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 0 MiB free)\n"
    "  CUDA1: NVIDIA GeForce RTX 3060 (12288 MiB, 12000 MiB free)\n"
)


def test_a_gpu_another_program_fills_is_passed_over(
    tiny_model: Path, llama_server: Path, tmp_path: Path
) -> None:
    """The room on a GPU is what its vendor tool reports free: a model with no device
    goes on CUDA1 (not spread over both), and its status says so, even when its request
    comes before the devices are listed."""
    seen = tmp_path / "seen"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    si.stand_in_nvidia_smi(bin_dir, BUSY_GPUS, "")
    server = si.stand_in_server(tmp_path / "llama-server", llama_server, BUSY_LISTING, seen)
    instances = {"m": {**TINY, "on_demand": True, "n_gpu_layers": 99}}
    env = {"PATH": si.path_with(bin_dir)}
    slow = server.read_text().replace('--list-devices" ]; then', '--list-devices" ]; then sleep 3;')
    server.write_text(slow)
    with gateway(tiny_model, instances, daemon={"llama_server": str(server)}, env=env) as gw:
        # Asked at once: the load waits for the listing, which takes 3 s here.
        assert _ask(gw, "m").status_code == 200
        assert seen.read_text().splitlines() == ["CUDA1"]
        assert _devices(gw)["CUDA0"]["budget_bytes"] == 0
        assert gw.ld.instance("m")["gateway"]["placed"] == "CUDA1"
        assert gw.ld.events("gateway.placed", model="m", device="CUDA1")
