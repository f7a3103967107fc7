"""A model's bytes on each device, before load (its estimate, shared out by placement)
and once measured (RSS/USS for RAM, the vendor's per-process count for the GPUs)."""

from __future__ import annotations

from collections.abc import Collection, Mapping

from llamad.gateway.devices.placement import RAM


def split(
    estimate: int | None,
    shares: Mapping[str, float],
    unified: Collection[str] = (),
    ram_measured: int | None = None,
    gpu_measured: int | None = None,
) -> dict[str, int]:
    """Bytes by device (`RAM` included) for a model `estimate` bytes big whose `shares`
    go to devices. A measurement replaces the estimate on the devices it covers: RAM's
    for RAM, the vendor's for the offloaded part (shared out as the placement says).
    What a unified device (Metal) holds is RAM too."""
    whole = estimate or 0
    offloaded = sum(shares.values())
    out: dict[str, int] = {}
    for name, share in shares.items():
        if gpu_measured is not None and offloaded > 0:
            out[name] = int(gpu_measured * share / offloaded)
        else:
            out[name] = int(whole * share)
    if ram_measured is not None:
        out[RAM] = int(ram_measured)
    else:
        ram = whole - sum(int(whole * s) for s in shares.values())
        out[RAM] = ram + sum(out[n] for n in shares if n in unified)
    return out
