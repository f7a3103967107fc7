"""Running the tools that report the devices: llama-server's `--list-devices`, then what
is present of nvidia-smi, amd-smi (or rocm-smi) and macOS's sysctl. Each run has a
deadline; a failure leaves the machine RAM-only, said in one log line."""

from __future__ import annotations

import asyncio
import contextlib
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import structlog

from llamad.backends.devices.amd import amd_smi_gpus, rocm_smi_gpus
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

log = structlog.get_logger("llamad.devices")

TIMEOUT_S = 15.0  # listing loads every backend library; a CUDA build takes seconds
_GPU_QUERY = "--query-gpu=index,name,memory.total,memory.free"
_APPS_QUERY = "--query-compute-apps=pid,used_memory"
_CSV = "--format=csv,noheader,nounits"
_AMD_TOOLS: tuple[tuple[str, tuple[str, ...], Callable[[str], list[Gpu]]], ...] = (
    ("amd-smi", ("metric", "--mem-usage", "--json"), amd_smi_gpus),
    ("rocm-smi", ("--showmeminfo", "vram", "--json"), rocm_smi_gpus),
)


@dataclass(frozen=True)
class Machine:
    """The devices as last read, and what each process holds on them where a vendor tool
    says (`held`: pid -> bytes; empty without one)."""

    devices: tuple[Device, ...] = ()
    held: Mapping[int, int] = field(default_factory=dict)


class ToolFailed(Exception):
    """A tool did not answer: missing, timed out, or exited non-zero (one line)."""


async def run(argv: list[str], timeout: float) -> str:
    """`argv`'s standard output; ToolFailed when it cannot say."""
    try:
        proc = await asyncio.create_subprocess_exec(
            *argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
    except OSError as exc:
        raise ToolFailed(f"{argv[0]}: {exc.strerror or exc}") from None
    try:
        out, _ = await asyncio.wait_for(proc.communicate(), timeout)
    except TimeoutError:
        raise ToolFailed(f"{argv[0]} did not answer within {timeout:g}s") from None
    finally:
        if proc.returncode is None:  # timed out, or the caller was cancelled: no orphan
            with contextlib.suppress(ProcessLookupError):
                proc.kill()
            await proc.wait()
    if proc.returncode != 0:
        raise ToolFailed(f"{argv[0]} exited with {proc.returncode}")
    return out.decode(errors="replace")


async def discover(server: ServerCommand, timeout: float = TIMEOUT_S) -> Machine:
    """The devices `server` can offload to, refined by the vendor tools present."""
    try:
        devices = list_devices(await run(server.argv("--list-devices"), timeout))
    except ToolFailed as exc:
        log.warning("devices.unknown", reason=str(exc), counting="RAM only")
        return Machine()
    if any(d.unified for d in devices):
        limit = await _sysctl("iogpu.wired_limit_mb", timeout)
        devices = with_wired_limit(devices, limit)
    return await refresh(Machine(tuple(devices)), timeout)


async def refresh(machine: Machine, timeout: float = TIMEOUT_S) -> Machine:
    """`machine` with free memory read now from the vendor tools on PATH: nvidia-smi for
    the CUDA devices (and what each process holds), amd-smi or else rocm-smi for the
    ROCm ones; what no tool reads stays as it was."""
    devices, held = list(machine.devices), machine.held
    smi = shutil.which("nvidia-smi")
    try:
        if smi is not None and _has(devices, "CUDA"):
            gpus = nvidia_gpus(await run([smi, _GPU_QUERY, _CSV], timeout))
            held = nvidia_apps(await run([smi, _APPS_QUERY, _CSV], timeout))
            devices = with_vendor(devices, gpus)
        if _has(devices, "ROCm") and (amd := await _amd(timeout)) is not None:
            devices = with_vendor(devices, amd, "ROCm")
    except ToolFailed as exc:
        log.warning("devices.vendor_failed", reason=str(exc))
        return machine
    if devices == list(machine.devices) and held is machine.held:
        return machine  # no tool read anything
    return Machine(tuple(devices), held)


async def _amd(timeout: float) -> list[Gpu] | None:
    """AMD's reading: amd-smi where it is installed, else the older rocm-smi."""
    for tool, argv, parse in _AMD_TOOLS:
        if (path := shutil.which(tool)) is not None:
            return parse(await run([path, *argv], timeout))
    return None


def _has(devices: list[Device], family: str) -> bool:
    return any(d.name.startswith(family) for d in devices)


async def _sysctl(name: str, timeout: float) -> int | None:
    tool = shutil.which("sysctl")
    if tool is None:
        return None
    try:
        return sysctl_int(await run([tool, "-n", name], timeout))
    except ToolFailed:
        return None  # unset on this macOS, or not a Mac at all
