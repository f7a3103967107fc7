"""Devices: the parsers by tables, and the probe against stand-in tools."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import device_stand_ins as si
import pytest

from llamad.backends.devices.amd import amd_smi_gpus, rocm_smi_gpus
from llamad.backends.devices.probe import Machine, discover, refresh
from llamad.backends.devices.readings import (
    Device,
    Gpu,
    list_devices,
    nvidia_apps,
    nvidia_gpus,
    sysctl_int,
    with_vendor,
    with_wired_limit,
)
from llamad.backends.tool import ServerCommand

MiB = 1024**2


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (si.CPU_ONLY, []),
        ("", []),
        (
            si.CUDA,
            [
                ("CUDA0", "NVIDIA GeForce RTX 4090", 24080, 23500),
                ("CUDA1", "NVIDIA GeForce RTX 3060", 12288, 11900),
            ],
        ),
        (si.ROCM, [("ROCm0", "AMD Radeon RX 7900 XTX", 24560, 24416)]),
        (si.VULKAN, [("Vulkan0", "Intel(R) Arc(tm) A770 Graphics (DG2)", 16032, 15200)]),
        (si.METAL, [("Metal", "Apple M2", 10923, 10923)]),
        (
            "ggml_vulkan: Found 1 Vulkan devices:\n" + si.ROCM,
            [("ROCm0", "AMD Radeon RX 7900 XTX", 24560, 24416)],
        ),
    ],
)
def test_list_devices_reads_each_line(text: str, expected: list[tuple[str, str, int, int]]) -> None:
    got = [(d.name, d.description, d.total // MiB, d.free // MiB) for d in list_devices(text)]
    assert got == expected


def test_nvidia_smi_rows_and_apps() -> None:
    assert nvidia_gpus(si.NVIDIA_GPUS + "2, Broken, [N/A], [N/A]\n") == [
        Gpu(0, "NVIDIA GeForce RTX 4090", 24564 * MiB, 20000 * MiB),
        Gpu(1, "NVIDIA GeForce RTX 3060", 12288 * MiB, 11000 * MiB),
    ]
    assert nvidia_apps(si.NVIDIA_APPS) == {4242: 4000 * MiB, 777: 1024 * MiB}
    assert nvidia_apps("No running processes found\n") == {}


@pytest.mark.parametrize(("text", "value"), [("10240\n", 10240), ("0", 0), ("", None), ("x", None)])
def test_sysctl_int(text: str, value: int | None) -> None:
    assert sysctl_int(text) == value


def test_vendor_and_wired_limit_replace_sizes() -> None:
    cuda = list_devices(si.CUDA)
    fresh = with_vendor(cuda, nvidia_gpus(si.NVIDIA_GPUS))
    assert [(d.total // MiB, d.free // MiB) for d in fresh] == [(24564, 20000), (12288, 11000)]
    metal = list_devices(si.METAL)
    assert with_wired_limit(metal, None) == metal
    raised = with_wired_limit(metal, 14336)
    assert raised == [Device("Metal", "Apple M2", 14336 * MiB, 14336 * MiB)]
    assert with_wired_limit(cuda, 14336) == cuda  # only the unified device


def _bin(tmp_path: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    return bin_dir


def test_discover_reads_the_listing_then_nvidia_smi(
    tmp_path: Path, llama_server: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = _bin(tmp_path)
    server = si.stand_in_server(bin_dir / "llama-server", llama_server, si.CUDA)
    si.stand_in_nvidia_smi(bin_dir)
    monkeypatch.setenv("PATH", si.path_with(bin_dir))
    machine = asyncio.run(discover(ServerCommand(server)))
    assert [(d.name, d.free // MiB) for d in machine.devices] == [
        ("CUDA0", 20000),
        ("CUDA1", 11000),
    ]
    assert machine.held == {4242: 4000 * MiB, 777: 1024 * MiB}


def test_discover_on_a_mac_takes_the_wired_limit(
    tmp_path: Path, llama_server: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bin_dir = _bin(tmp_path)
    server = si.stand_in_server(bin_dir / "llama-server", llama_server, si.METAL)
    monkeypatch.setenv("PATH", si.path_with(bin_dir))
    si.stand_in_sysctl(bin_dir, {"hw.memsize": str(16 * 1024**3)})
    plain = asyncio.run(discover(ServerCommand(server)))
    assert [(d.name, d.total // MiB) for d in plain.devices] == [("Metal", 10923)]
    si.stand_in_sysctl(bin_dir, {"iogpu.wired_limit_mb": "12288"})
    raised = asyncio.run(discover(ServerCommand(server)))
    assert [(d.name, d.total // MiB) for d in raised.devices] == [("Metal", 12288)]


def test_the_real_cpu_build_lists_nothing(llama_server: Path) -> None:
    assert asyncio.run(discover(ServerCommand(llama_server))) == Machine()


def test_a_failing_listing_leaves_ram_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    broken = tmp_path / "llama-server"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    assert asyncio.run(discover(ServerCommand(broken))) == Machine()
    hanging = tmp_path / "hangs"
    hanging.write_text("#!/bin/sh\nexec sleep 30\n")
    hanging.chmod(0o755)
    assert asyncio.run(discover(ServerCommand(hanging), timeout=0.3)) == Machine()
    missing = ServerCommand(tmp_path / "nowhere")
    assert asyncio.run(discover(missing)) == Machine()


def test_refresh_without_nvidia_smi_keeps_the_listing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(_bin(tmp_path)))
    machine = Machine(tuple(list_devices(si.CUDA)))
    assert asyncio.run(refresh(machine)) is machine


@pytest.mark.parametrize(
    ("reader", "text", "rows"),
    [
        pytest.param(amd_smi_gpus, si.AMD_SMI_LIST, [(0, 24560, 18000), (1, 8176, 8000)],
                     id="amd-smi, a list"),
        pytest.param(amd_smi_gpus, si.AMD_SMI_WRAPPED, [(0, 24560, 18000), (1, 8176, 8000)],
                     id="amd-smi, in gpu_data"),
        pytest.param(amd_smi_gpus, '[{"gpu": 0, "mem_usage": {"total_vram": {"value": 192, '
                     '"unit": "GB"}, "used_vram": {"value": 64, "unit": "GB"}}}]',
                     [(0, 192 * 1024, 128 * 1024)], id="amd-smi, GB, free from used"),
        pytest.param(amd_smi_gpus, '[{"gpu": 0, "mem_usage": {"total_vram": "N/A"}}]', [],
                     id="amd-smi, N/A"),
        pytest.param(amd_smi_gpus, "WARNING: user is not in the render group\n"
                     + si.AMD_SMI_LIST, [(0, 24560, 18000), (1, 8176, 8000)],
                     id="amd-smi, a warning first"),
        pytest.param(rocm_smi_gpus, si.ROCM_SMI, [(0, 24560, 16880), (1, 8176, 8000)],
                     id="rocm-smi"),
        pytest.param(rocm_smi_gpus, "GPU[0]\t\t: VRAM Total Memory (B): 34342961152\n", [],
                     id="rocm-smi, plain text"),
        pytest.param(amd_smi_gpus, "", [], id="nothing"),
    ],
)  # fmt: skip
def test_amd_readings(reader: Any, text: str, rows: list[tuple[int, int, int]]) -> None:
    assert [(g.index, g.total // MiB, g.free // MiB) for g in reader(text)] == rows


@pytest.mark.parametrize(
    ("tools", "free"),
    [
        pytest.param({"amd-smi": si.AMD_SMI_WRAPPED}, [18000, 8000], id="amd-smi"),
        pytest.param({"rocm-smi": si.ROCM_SMI}, [16880, 8000], id="rocm-smi"),
        pytest.param({"amd-smi": si.AMD_SMI_LIST, "rocm-smi": si.ROCM_SMI}, [18000, 8000],
                     id="amd-smi first"),
        pytest.param({}, [24416, 8000], id="neither: the listing"),
    ],
)  # fmt: skip
def test_refresh_reads_amd_free_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tools: dict[str, str], free: list[int]
) -> None:
    bin_dir = _bin(tmp_path)
    for tool, text in tools.items():
        si.stand_in_amd(bin_dir, tool, text)
    monkeypatch.setenv("PATH", str(bin_dir))
    machine = asyncio.run(refresh(Machine(tuple(list_devices(si.ROCM_TWO)))))
    assert [d.free // MiB for d in machine.devices] == free
    assert [d.name for d in machine.devices] == ["ROCm0", "ROCm1"]
