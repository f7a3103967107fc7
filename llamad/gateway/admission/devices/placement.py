"""Where a model's bytes go, from its llama-server settings: the share of it on each GPU.

llama-server offloads every layer by default (`-ngl auto`), splits layers across all its
devices (`-sm layer`) in proportion to `-ts` or to the devices' memory, keeps to `-dev`'s
list when set (`none`: no offload), and with `-sm none` uses one GPU (`-mg`). What is not
offloaded stays in RAM. Pure functions: the shares from the settings, then the bytes on
each device from the estimate and what was measured.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence

from llamad.backends.devices.readings import Device

RAM = "RAM"


def offload_shares(
    settings: Mapping[str, str], layers: int | None, devices: Sequence[Device]
) -> dict[str, float]:
    """The fraction of the model on each device it uses, by device name; what is left of
    1.0 stays in RAM. Empty when nothing is offloaded (no devices, `-ngl 0`, `-dev none`)."""
    chosen = _chosen(settings.get("LLAMA_ARG_DEVICE", ""), devices)
    offloaded = _offloaded(settings.get("LLAMA_ARG_N_GPU_LAYERS", "auto"), layers)
    if not chosen or offloaded <= 0:
        return {}
    if settings.get("LLAMA_ARG_SPLIT_MODE", "layer").strip().lower() == "none":
        main = _int(settings.get("LLAMA_ARG_MAIN_GPU", "0")) or 0
        chosen = [chosen[main if 0 <= main < len(chosen) else 0]]
    weights = _split(settings.get("LLAMA_ARG_TENSOR_SPLIT", ""), chosen)
    whole = sum(weights) or 1.0
    return {d.name: offloaded * w / whole for d, w in zip(chosen, weights, strict=True)}


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


def _chosen(value: str, devices: Sequence[Device]) -> list[Device]:
    names = [n.strip() for n in value.split(",") if n.strip()]
    if not names:
        return list(devices)
    if any(n.lower() == "none" for n in names):
        return []
    by_name = {d.name: d for d in devices}
    return [by_name[n] for n in names if n in by_name]


def _offloaded(value: str, layers: int | None) -> float:
    """The fraction of the layers `-ngl value` puts on devices (the output layer counts
    as one more, as llama.cpp counts it)."""
    value = value.strip().lower()
    if value in ("", "auto", "all"):
        return 1.0
    count = _int(value)
    if count is None or count < 0:
        return 1.0
    if count == 0:
        return 0.0
    if not layers:
        return 1.0  # the header does not say how many: assume all of them
    return min(1.0, count / (layers + 1))


def _split(value: str, chosen: Sequence[Device]) -> list[float]:
    parts = [p.strip() for p in value.replace("/", ",").split(",") if p.strip()]
    numbers = [_float(p) for p in parts]
    if len(chosen) > 1 and len(numbers) >= len(chosen) and all(n is not None for n in numbers):
        given = [max(0.0, n or 0.0) for n in numbers[: len(chosen)]]
        if sum(given) > 0:
            return given
    return [float(d.total) for d in chosen]


def _int(text: str) -> int | None:
    try:
        return int(text.strip())
    except ValueError:
        return None


def _float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None
