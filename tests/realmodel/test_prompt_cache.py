"""The prompt cache across processes on the real model: a restart restores the
conversation (same answer at temperature 0, almost nothing evaluated), and a slot saved
under another context size is refused, never loaded."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import psutil
import pytest
from gemma_gateway import gemma_gateway
from helpers import Llamad, free_port, write_config

from llamad.config.load import load
from llamad.gateway.admission.memory import estimate

# gemma-3-270m at 32k: 15 of its 18 layers are windowed (512), one KV head of 256, f16:
# the full-size window cache adds 15 x (32768 - 1024) x 1 KiB, 2.3x what the model
# needs without it.
FULL_WINDOW_32K = 15 * (32768 - 1024) * 1024

# A conversation long enough that evaluating it again shows (a few hundred tokens).
STORY = " ".join(f"Day {n}: the lighthouse keeper counted {n * 7} ships." for n in range(1, 40))
MESSAGES = [{"role": "user", "content": f"{STORY}\nHow many ships on day 3? Answer with a number."}]


def _config(
    tmp_path: Path, model: Path, template: Path, port: int, ctx: int, **more: object
) -> Path:
    table = {
        "model": model,
        "port": port,
        "ctx_size": ctx,
        "n_parallel": 1,
        "chat_template_file": template,
        "threads": 2,
        **more,
    }
    daemon = {"state_dir": str(tmp_path / "state")}
    return write_config(tmp_path / "llamad.toml", {"gemma": table}, daemon=daemon)


def _ask(port: int) -> dict[str, Any]:
    body = {"messages": MESSAGES, "max_tokens": 8, "temperature": 0}
    url = f"http://127.0.0.1:{port}/v1/chat/completions"
    answer: dict[str, Any] = httpx.post(url, json=body, timeout=120).json()
    return answer


def _restart(d: Llamad, name: str) -> None:
    pid = d.running(name)
    d.api("POST", f"/v1/instances/{name}/restart?wait=120", timeout=130)
    d.wait_running(name, 120, not_pid=pid)


@pytest.mark.timeout(240)
def test_a_restart_restores_the_conversation(
    tmp_path: Path, real_model: Path, real_model_template: Path
) -> None:
    """The next turn after a restart evaluates a few tokens, not the conversation, and
    answers as before at temperature 0; the sliding-window model runs with swa_full."""
    port = free_port()
    with Llamad(_config(tmp_path, real_model, real_model_template, port, 2048)) as d:
        d.wait_ready()
        d.wait_running("gemma", 60)
        first = _ask(port)
        assert first["timings"]["prompt_n"] > 300
        _restart(d, "gemma")
        again = _ask(port)
        assert again["timings"]["prompt_n"] <= 4, again["timings"]
        assert again["choices"][0]["message"] == first["choices"][0]["message"]
        cache = d.instance("gemma")["prompt_cache"]
        assert (cache["kept"], cache["note"]) == (True, None)
        assert 0 < cache["full_window_bytes"] < 32 * 1024**2  # small at 2048: chosen
        listing = d.api("GET", "/v1/cache")
        assert [s["model"] for s in listing["saved"]] == ["gemma"]
        assert d.stop() == 0
    restored = d.events("cache.restored", instance="gemma")
    assert restored
    assert restored[0]["tokens"] > 300


@pytest.mark.timeout(240)
def test_a_slot_saved_under_another_context_is_refused(
    tmp_path: Path, real_model: Path, real_model_template: Path
) -> None:
    """Saved at ctx_size 1024, the instance comes back at 2048: the file is refused and
    removed, and the conversation is evaluated again in full."""
    port = free_port()
    cfg = _config(tmp_path, real_model, real_model_template, port, 1024)
    with Llamad(cfg) as d:
        d.wait_ready()
        d.wait_running("gemma", 60)
        _ask(port)
        pid = d.running("gemma")
        _config(tmp_path, real_model, real_model_template, port, 2048)
        d.api("POST", "/v1/reload")
        d.wait_running("gemma", 120, not_pid=pid)
        again = _ask(port)
        assert again["timings"]["prompt_n"] > 300
        assert d.api("GET", "/v1/cache")["saved"] == []
        assert d.stop() == 0
    refused = d.events("cache.refused", instance="gemma", op="restore")
    assert refused
    assert "n_ctx" in refused[0]["reason"]
    assert not d.events("cache.restored")


def test_a_sliding_window_model_runs_with_the_full_window_cache_when_kept(
    tmp_path: Path, real_model: Path, real_model_template: Path
) -> None:
    """Gemma 3's GGUF names a sliding window: swa_full with the cache, not without it."""
    cfg = _config(tmp_path, real_model, real_model_template, free_port(), 1024)
    kept = load(cfg).instances["gemma"]
    assert dict(kept.settings)["LLAMA_ARG_SWA_FULL"] == "true"
    where = tmp_path / "state" / "prompt-cache" / "gemma"
    assert kept.args[-2:] == ("--slot-save-path", str(where))
    cfg.write_text(cfg.read_text().replace("[daemon]\n", "[daemon]\nprompt_cache = false\n", 1))
    off = load(cfg).instances["gemma"]
    assert "LLAMA_ARG_SWA_FULL" not in dict(off.settings)
    assert off.prompt_cache is None
    assert off.cache_note is None


def test_a_costly_full_window_cache_is_left_to_the_user(
    tmp_path: Path, real_model: Path, real_model_template: Path
) -> None:
    """At 32k the full-size window cache would cost more than 1.1x llama-server's own
    memory: the model runs as llama-server runs it, its slots unsaved, and the estimate
    counts what is allocated; `cache_swa_full = true` takes the cost."""
    cfg = _config(tmp_path, real_model, real_model_template, free_port(), 32768)
    plain = load(cfg).instances["gemma"]
    assert "LLAMA_ARG_SWA_FULL" not in dict(plain.settings)
    assert "--slot-save-path" not in plain.args
    assert plain.prompt_cache is None
    assert plain.window_cost == FULL_WINDOW_32K
    assert plain.cache_note is not None
    assert "465 MiB more memory (2.3" in plain.cache_note
    assert "cache_swa_full = true" in plain.cache_note
    cfg = _config(tmp_path, real_model, real_model_template, free_port(), 32768,
                  cache_swa_full=True)  # fmt: skip
    chosen = load(cfg).instances["gemma"]
    assert dict(chosen.settings)["LLAMA_ARG_SWA_FULL"] == "true"
    assert chosen.prompt_cache is not None
    assert (chosen.cache_note, chosen.window_cost) == (None, FULL_WINDOW_32K)
    mine, full = estimate(plain), estimate(chosen)
    assert mine is not None
    assert full == mine + FULL_WINDOW_32K


@pytest.mark.timeout(240)
def test_gemma_at_32k_runs_without_the_full_window_cache_and_says_why(
    real_model: Path, real_model_template: Path
) -> None:
    """On the real server: no --swa-full in the child's environment, and the reason and
    the cost in status, the cache listing, `llamactl cache` and the page's status."""
    with gemma_gateway(real_model, real_model_template, ctx_size=32768) as (base, d):
        pid = d.running("gemma")
        assert pid is not None
        env = psutil.Process(pid).environ()
        assert env["LLAMA_ARG_CTX_SIZE"] == "32768"
        assert "LLAMA_ARG_SWA_FULL" not in env
        assert "--slot-save-path" not in psutil.Process(pid).cmdline()
        cache = d.instance("gemma")["prompt_cache"]
        assert cache["kept"] is False
        assert "full-size window cache" in cache["note"]
        assert cache["full_window_bytes"] == FULL_WINDOW_32K
        notes = d.api("GET", "/v1/cache")["notes"]
        # The listing's note is the decision alone; status adds the figures beside it.
        decision = {k: cache[k] for k in ("kept", "note", "full_window_bytes")}
        assert notes == [{"model": "gemma", **decision}]
        listing = d.ctl("cache")
        assert f"gemma: not saved: {cache['note']}" in listing.stdout.splitlines()
        page = httpx.get(f"{base}/ui/api/status", timeout=5).json()
        assert [m["cache_note"] for m in page["models"]] == [cache["note"]]
