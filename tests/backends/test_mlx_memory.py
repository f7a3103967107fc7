"""An MLX model's memory as it grows: its estimate is its weights plus the limit on the
prompt caches mlx_lm.server keeps, a limit llamad sets from what the machine can give
its models unless the config sets one."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_mlx_backend import mlx_config, problems

from llamad.backends.mlx.cache_limit import (
    FLAG,
    default_limit,
    limit_in,
    machine_default,
    parse_size,
)
from llamad.backends.registry import backend_for
from llamad.config.load import load
from llamad.gateway.admission.memory import estimate

GiB = 1024**3


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("1000000", 1_000_000),
        ("4G", 4 * 10**9),
        ("4gb", 4 * 10**9),
        ("500MB", 500 * 10**6),
        ("1.5 G", 1_500_000_000),
        ("lots", None),
        ("4GiB", None),
        ("-1", None),
    ],
)
def test_sizes_are_read_as_mlx_lm_reads_them(text: str, size: int | None) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize(
    ("ram_gib", "apple", "limit"),
    [
        (16, True, 16 * GiB * 2 // 3 // 8),  # an eighth of Metal's working set
        (36, True, 3 * GiB),
        (128, True, 12 * GiB),
        (64, False, 8 * GiB),  # off a Mac, an eighth of the RAM
    ],
)
def test_the_limit_llamad_sets(ram_gib: int, apple: bool, limit: int) -> None:
    assert default_limit(ram_gib * GiB, apple) == pytest.approx(limit, abs=1)


def test_args_say_the_limit() -> None:
    assert limit_in(["--max-tokens", "9", FLAG, "2G"]) == 2 * 10**9
    assert limit_in([f"{FLAG}=300MB"]) == 300 * 10**6
    assert limit_in(["--max-tokens", "9"]) is None


def test_the_estimate_counts_what_the_prompt_caches_may_hold(
    tmp_path: Path, tiny_mlx_model: Path
) -> None:
    weights = sum(p.stat().st_size for p in tiny_mlx_model.glob("*.safetensors"))
    spec = load(mlx_config(tmp_path, tiny_mlx_model)).instances["m"]
    assert spec.args.count(FLAG) == 1
    assert estimate(spec) == weights + machine_default()
    assert backend_for("mlx").status_extras(spec)["model_bytes"] == weights
    # The config's own limit is kept, passed once, and counted.
    spec = load(mlx_config(tmp_path, tiny_mlx_model, prompt_cache_bytes="2G")).instances["m"]
    assert [a for a in spec.args if a.startswith("--prompt-cache")] == [FLAG]
    assert estimate(spec) == weights + 2 * 10**9
    spec = load(mlx_config(tmp_path, tiny_mlx_model, args=[FLAG, "1000"])).instances["m"]
    assert estimate(spec) == weights + 1000


def test_a_limit_mlx_lm_would_refuse_is_one_line(tmp_path: Path, tiny_mlx_model: Path) -> None:
    cfg = mlx_config(tmp_path, tiny_mlx_model, prompt_cache_bytes="lots")
    (line,) = problems(cfg)
    assert line.startswith(f"{cfg}:")
    assert "instances.m.prompt_cache_bytes: --prompt-cache-bytes must be a size such as" in line
    (line,) = problems(mlx_config(tmp_path, tiny_mlx_model, args=[f"{FLAG}=many"]))
    assert "instances.m.args: --prompt-cache-bytes must be a size such as" in line
