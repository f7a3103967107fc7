"""Where a llama-server's model goes when the config does not say: the one rule that
tells whether it says, and the launch's settings with the device the gateway chose."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from llamad.backends.spec import InstanceSpec

DEVICE_ENV = "LLAMA_ARG_DEVICE"
# Settings that already decide where the layers go: the gateway leaves such a model be.
# An RPC head too: `--device` would keep its layers off the workers' devices.
_WHERE = frozenset({DEVICE_ENV, "LLAMA_ARG_SPLIT_MODE", "LLAMA_ARG_MAIN_GPU"})
_WHERE |= {"LLAMA_ARG_TENSOR_SPLIT", "LLAMA_ARG_RPC"}
_FLAGS = frozenset({"-dev", "--device", "-sm", "--split-mode", "-mg", "--main-gpu", "-ts"})
_FLAGS |= {"--tensor-split", "--rpc"}


def says_where(spec: InstanceSpec) -> bool:
    """True when `spec` is not a llama-server's, or its settings or args already place it
    (`device`, `split_mode`, `main_gpu`, `tensor_split`, `n_gpu_layers = 0`, `rpc`)."""
    if spec.kind != "llama-server" or spec.workers or spec.remote_workers:
        return True
    settings = dict(spec.settings)
    if any(k in settings for k in _WHERE) or _no_offload(settings):
        return True
    return any(a.split("=", 1)[0] in _FLAGS for a in spec.args)


def placed(spec: InstanceSpec, device: str | None) -> InstanceSpec:
    """`spec` as launched on `device` (None, or a spec that says where: unchanged)."""
    if device is None or says_where(spec):
        return spec
    settings = dict(spec.settings) | {DEVICE_ENV: device}
    return dataclasses.replace(spec, settings=tuple(sorted(settings.items())))


def _no_offload(settings: Mapping[str, str]) -> bool:
    return settings.get("LLAMA_ARG_N_GPU_LAYERS", "").strip() == "0"
