"""The prompt cache across processes, on the real llama-server and the tiny model: slots
saved before a planned stop, restored before the next process is routed to, and files
that do not fit (or do not load) refused and removed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import free_port
from inprocess import complete, config, events, supervising
from structlog.testing import capture_logs

from llamad.lifecycle.states import State
from llamad.supervise.slot_files import content_digest
from llamad.supervise.steps import start, stop

PROMPT = "abc def ghi jkl mno pqr stu vwx yz " * 4


def _tiny(tiny_model: Path, port: int, **keys: Any) -> dict[str, dict[str, Any]]:
    return {"m": {"model": tiny_model, "port": port, "ctx_size": 512, "n_parallel": 1, **keys}}


async def _complete(port: int) -> dict[str, Any]:
    return await complete(port, PROMPT)


async def test_saved_before_a_stop_and_restored_before_routing(
    tmp_path: Path, tiny_model: Path
) -> None:
    """A stop saves the slot with its sidecar; the next process gets it back while still
    starting, and the same prompt then evaluates almost nothing."""
    port = free_port()
    with capture_logs() as logs:
        async with supervising(config(tmp_path, _tiny(tiny_model, port))) as sup:
            inst = await sup.state("m", State.RUNNING)
            first = await _complete(port)
            assert first["timings"]["prompt_n"] > 20
            await stop(inst)
            directory = inst.spec.prompt_cache
            assert directory is not None
            assert (directory / "slot-0.bin").is_file()
            fit = json.loads((directory / "slot-0.json").read_text())["fit"]
            assert fit["n_ctx"] == 512
            assert fit["build"]
            await start(inst)
            await sup.state("m", State.RUNNING)
            again = await _complete(port)
    assert again["timings"]["prompt_n"] <= 2, again["timings"]
    saved = events(logs, "cache.saved", instance="m", slot=0)
    restored = events(logs, "cache.restored", instance="m", slot=0)
    assert saved
    assert saved[0]["bytes"] > 0
    assert saved[0]["tokens"] > 20
    assert restored
    assert restored[0]["tokens"] == saved[0]["tokens"]


def reseal(directory: Path) -> None:
    """Record slot 0's bytes as they are now, as llamad would have saved them."""
    side = directory / "slot-0.json"
    body = json.loads(side.read_text())
    side.write_text(json.dumps({**body, "sha256": content_digest(directory / "slot-0.bin")}))


async def test_a_file_that_does_not_fit_or_load_is_removed(
    tmp_path: Path, tiny_model: Path
) -> None:
    """A sidecar from another build is refused unloaded; a file whose bytes are not those
    llamad saved, or that has no record of them, is refused unloaded; a file llama-server
    cannot load is removed; none keeps the instance from running."""
    port = free_port()
    with capture_logs() as logs:
        async with supervising(config(tmp_path, _tiny(tiny_model, port))) as sup:
            inst = await sup.state("m", State.RUNNING)
            await _complete(port)
            await stop(inst)
            directory = inst.spec.prompt_cache
            assert directory is not None
            side = directory / "slot-0.json"
            body = json.loads(side.read_text())
            side.write_text(json.dumps({**body, "fit": {**body["fit"], "build": "b0-other"}}))
            await start(inst)
            await sup.state("m", State.RUNNING)
            assert not (directory / "slot-0.bin").exists()
            data = directory / "slot-0.bin"
            # One that fits on paper but holds other bytes (another conversation's, a
            # client's save under this name, a disk's damage); one whose record has no
            # digest; and one llamad recorded as it is, which llama-server cannot load.
            for damage in ("bytes", "no record", "resealed"):
                await _complete(port)
                await stop(inst)
                size = data.stat().st_size  # the size its sidecar says: llama-server reads it
                data.write_bytes((b"not a slot" * size)[:size])
                if damage == "no record":
                    side = directory / "slot-0.json"
                    body = json.loads(side.read_text())
                    del body["sha256"]
                    side.write_text(json.dumps(body))
                elif damage == "resealed":
                    reseal(directory)
                await start(inst)
                await sup.state("m", State.RUNNING)
                assert not data.exists(), damage
    refused = [e["reason"] for e in events(logs, "cache.refused", instance="m", op="restore")]
    assert "build" in refused[0]
    assert refused[1] == "differs: its bytes are not those llamad saved"
    assert refused[2] == "differs: no record of the bytes llamad saved"
    assert refused[3].startswith("HTTP")
    assert not events(logs, "cache.restored")


async def test_a_failing_save_never_holds_up_the_stop(tmp_path: Path, tiny_model: Path) -> None:
    """The cache directory cannot be made (a file is in the way): the stop goes on."""
    port = free_port()
    blocker = tmp_path / "blocked"
    blocker.write_text("")
    cfg = config(tmp_path, _tiny(tiny_model, port))
    text = cfg.read_text().replace("[daemon]\n", f'[daemon]\ncache_dir = "{blocker}/x"\n', 1)
    cfg.write_text(text)
    with capture_logs() as logs:
        async with supervising(cfg) as sup:
            inst = await sup.state("m", State.RUNNING)
            await _complete(port)
            await stop(inst)
            assert inst.record.state is State.STOPPED
    assert events(logs, "cache.refused", instance="m", op="save")


async def test_turned_off_per_instance(tmp_path: Path, tiny_model: Path) -> None:
    """`prompt_cache = false`: no save path given, nothing saved, status says it."""
    port = free_port()
    cfg = config(tmp_path, _tiny(tiny_model, port, prompt_cache=False))
    async with supervising(cfg) as sup:
        inst = await sup.state("m", State.RUNNING)
        assert inst.spec.prompt_cache is None
        assert inst.spec.cache_note is None
        assert "--slot-save-path" not in inst.spec.args


async def test_restores_that_reuse_nothing_stop_the_saves(tmp_path: Path, tiny_model: Path) -> None:
    """The request after each restore reuses none of it (another conversation, as long as
    a hybrid model's own would be evaluated): after two, the instance's saves stop, its
    files go, and no stop writes a byte more; status and metrics say why."""
    port = free_port()
    other = "zyx wvu tsr qpo nml kji hgf edc ba " * 6  # longer, and nothing in common
    with capture_logs() as logs:
        async with supervising(config(tmp_path, _tiny(tiny_model, port))) as sup:
            inst = await sup.state("m", State.RUNNING)
            cache = sup.supervisor.runtime.cache
            assert cache is not None
            await _complete(port)
            for _ in range(2):
                await stop(inst)
                await start(inst)
                await sup.state("m", State.RUNNING)
                t = (await complete(port, other))["timings"]
                cache.served("m", t["cache_n"], t["prompt_n"])
                await _complete(port)  # what the next stop would save
            directory = inst.spec.prompt_cache
            assert directory is not None
            assert not list(directory.glob("slot-*"))
            written = len(events(logs, "cache.saved"))
            await stop(inst)
            await start(inst)
            await sup.state("m", State.RUNNING)
            assert not list(directory.glob("slot-*"))
            judged = cache.verdicts.of("m")
    assert len(events(logs, "cache.saved")) == written
    (why,) = events(logs, "cache.stopped", instance="m")
    assert why["reason"] == "2 restore(s) in a row reused nothing"
    assert judged is not None
    assert (judged["restores"], judged["misses"], judged["hits"]) == (2, 2, 0)


async def test_a_recurrent_model_stops_its_saves_at_the_first_restore_that_reuses_nothing(
    tmp_path: Path, tiny_mamba: Path
) -> None:
    """On the real llama-server and a tiny Mamba: the restore answers success with every
    token, and the same conversation's next turn is evaluated from its first token. That
    one miss, expected of the architecture, stops the saves: the next stop writes nothing."""
    port = free_port()
    with capture_logs() as logs:
        async with supervising(config(tmp_path, _tiny(tiny_mamba, port))) as sup:
            inst = await sup.state("m", State.RUNNING)
            cache = sup.supervisor.runtime.cache
            assert cache is not None
            first = (await _complete(port))["timings"]
            await stop(inst)
            await start(inst)
            await sup.state("m", State.RUNNING)
            t = (await complete(port, PROMPT + "more"))["timings"]
            cache.served("m", t["cache_n"], t["prompt_n"])
            await _complete(port)
            await stop(inst)
            directory = inst.spec.prompt_cache
            assert directory is not None
            assert not list(directory.glob("slot-*"))
    (restored,) = events(logs, "cache.restored", instance="m")
    assert restored["tokens"] >= first["prompt_n"]  # llama-server says it all came back
    assert t["cache_n"] == 0  # and none of it was reused
    assert t["prompt_n"] > first["prompt_n"]
    (why,) = events(logs, "cache.stopped", instance="m")
    assert "mamba is a hybrid or recurrent architecture" in why["reason"]
    assert len(events(logs, "cache.saved", instance="m")) == 1  # the first stop's alone
