"""Stand-ins for the tools that report devices, which cannot run here (no GPU): a
`llama-server` that prints a recorded `--list-devices` and runs the real server
otherwise, and `nvidia-smi` and `sysctl` that print recorded answers.

The listings follow llama.cpp's own format (common/arg.cpp: `  NAME: DESCRIPTION (TOTAL
MiB, FREE MiB free)` under `Available devices:`); the CPU-only one is what the test
extra's build prints here.
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

HEAD = "Available devices:\n"
CPU_ONLY = HEAD
CUDA = HEAD + (
    "  CUDA0: NVIDIA GeForce RTX 4090 (24080 MiB, 23500 MiB free)\n"
    "  CUDA1: NVIDIA GeForce RTX 3060 (12288 MiB, 11900 MiB free)\n"
)
ROCM = HEAD + "  ROCm0: AMD Radeon RX 7900 XTX (24560 MiB, 24416 MiB free)\n"
VULKAN = HEAD + "  Vulkan0: Intel(R) Arc(tm) A770 Graphics (DG2) (16032 MiB, 15200 MiB free)\n"
# A 16 GiB Mac: Metal's recommended working set, about 2/3 of the RAM (10.7 GiB).
METAL = HEAD + "  Metal: Apple M2 (10923 MiB, 10923 MiB free)\n"
NVIDIA_GPUS = "0, NVIDIA GeForce RTX 4090, 24564, 20000\n1, NVIDIA GeForce RTX 3060, 12288, 11000\n"
NVIDIA_APPS = "4242, 3500\n4242, 500\n777, 1024\n"
# AMD's tools as they print a card's VRAM: amd-smi (ROCm 6.0-6.2: a bare list; later:
# wrapped in `gpu_data`; units are MiB though it writes "MB") and rocm-smi (bytes, as
# strings, one object per card beside `system`).
ROCM_TWO = ROCM + "  ROCm1: AMD Radeon RX 7600 (8176 MiB, 8000 MiB free)\n"
_AMD_GPU = (
    '{{"gpu": {i}, "mem_usage": {{"total_vram": {{"value": {t}, "unit": "MB"}}, '
    '"used_vram": {{"value": {u}, "unit": "MB"}}, "free_vram": {{"value": {f}, "unit": "MB"}}, '
    '"total_visible_vram": {{"value": {t}, "unit": "MB"}}, "total_gtt": {{"value": 31936, '
    '"unit": "MB"}}, "used_gtt": "N/A", "free_gtt": "N/A"}}}}'
)
AMD_SMI_LIST = (
    "[\n    "
    + _AMD_GPU.format(i=0, t=24560, u=6560, f=18000)
    + ",\n    "
    + _AMD_GPU.format(i=1, t=8176, u=176, f=8000)
    + "\n]\n"
)
AMD_SMI_WRAPPED = '{"gpu_data": ' + AMD_SMI_LIST.strip() + "}\n"
ROCM_SMI = (
    '{"card0": {"Card Series": "Radeon RX 7900 XTX", "VRAM Total Memory (B)": "25753026560", '
    '"VRAM Total Used Memory (B)": "8053063680"}, "card1": {"Card Series": "Radeon RX 7600", '
    '"VRAM Total Memory (B)": "8573157376", "VRAM Total Used Memory (B)": "184549376"}, '
    '"system": {"Driver version": "6.7.0"}}\n'
)


def _script(path: Path, body: str) -> Path:
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)
    return path


def _say(text: str) -> str:
    return f"printf '%s' {shlex.quote(text)}"


def stand_in_server(path: Path, real: Path, listing: str, seen: Path | None = None) -> Path:
    """A llama-server at `path` that answers `--list-devices` with `listing` and runs the
    real one (`real`) for everything else. The devices exist only in the listing, so the
    settings that name them are dropped before the real (CPU) server runs; with `seen`,
    each launch first appends the `LLAMA_ARG_DEVICE` it was given (a line, maybe empty)."""
    note = f'echo "${{LLAMA_ARG_DEVICE:-}}" >> {shlex.quote(str(seen))}' if seen else ":"
    return _script(
        path,
        f'if [ "$1" = "--list-devices" ]; then {_say(listing)}; exit 0; fi\n'
        f'case "$1" in --help|--version) ;; *) {note};; esac\n'
        "unset LLAMA_ARG_DEVICE LLAMA_ARG_SPLIT_MODE LLAMA_ARG_MAIN_GPU LLAMA_ARG_TENSOR_SPLIT\n"
        f'exec {shlex.quote(str(real))} "$@"\n',
    )


def stand_in_nvidia_smi(bin_dir: Path, gpus: str = NVIDIA_GPUS, apps: str = NVIDIA_APPS) -> Path:
    """nvidia-smi in `bin_dir`, answering the GPU and the compute-apps queries."""
    return _script(
        bin_dir / "nvidia-smi",
        'case "$1" in\n'
        f"  --query-gpu=*) {_say(gpus)};;\n"
        f"  --query-compute-apps=*) {_say(apps)};;\n"
        "  *) exit 6;;\n"
        "esac\n",
    )


def stand_in_amd(bin_dir: Path, tool: str, text: str) -> Path:
    """`amd-smi` or `rocm-smi` in `bin_dir`, printing `text` for its memory query."""
    query = "metric" if tool == "amd-smi" else "--showmeminfo"
    return _script(
        bin_dir / tool, f'if [ "$1" = {query} ]; then {_say(text)}; exit 0; fi\nexit 2\n'
    )


def stand_in_sysctl(bin_dir: Path, values: dict[str, str]) -> Path:
    """macOS's sysctl in `bin_dir`: `sysctl -n NAME` prints `values[NAME]`, else fails."""
    cases = "".join(f"  {shlex.quote(k)}) {_say(v)};;\n" for k, v in values.items())
    return _script(
        bin_dir / "sysctl",
        f'case "$2" in\n{cases}  *) echo "sysctl: unknown oid \'$2\'" >&2; exit 1;;\nesac\n',
    )


def path_with(bin_dir: Path) -> str:
    """PATH with `bin_dir` first."""
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
