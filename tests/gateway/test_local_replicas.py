"""Two local instances sharing the alias `shared`, end to end with the real llama-server:
one daemon, no fleet, each instance the paced model with one slot and one thread (as
two GPUs of one box would serve it)."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import ollama
import pytest
import replica_helpers
from gateway_helpers import Gw, gateway
from helpers import wait_for
from replica_helpers import peaks

from bench.gateway_sse import PACED
from llamad.daemon.tinymodel import write_tiny_model

pytestmark = pytest.mark.timeout(180)

ONE = {"ctx_size": 1024, "n_parallel": 1, "threads": 1, "aliases": ["shared"]}
SYSTEM = "You are a patient assistant who answers every question in full. " * 4


@pytest.fixture(scope="module")
def paced(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bench's paced model: a token every few ms, so requests overlap."""
    return write_tiny_model(tmp_path_factory.mktemp("paced") / "paced.gguf", shape=PACED)


@pytest.fixture
def gw(paced: Path) -> Iterator[Gw]:
    with gateway(paced, {"r0": ONE, "r1": ONE}) as running:
        yield running


def chat(gw: Gw, messages: list[dict[str, str]]) -> dict[str, Any]:
    return replica_helpers.chat(gw.base, messages)


def stream(gw: Gw, tokens: int = 24) -> str:
    return replica_helpers.stream(gw.base, tokens)


def activity(gw: Gw, count: int) -> list[dict[str, Any]]:
    return replica_helpers.activity(gw.base, count)


def test_streams_use_both_replicas_and_wait_at_the_gateway_not_on_a_server(gw: Gw) -> None:
    listed = [m for m in gw.models().values() if m["id"] == "shared"]
    assert len(listed) == 1, "the alias is listed once"
    assert listed[0]["llamad"]["replicas"] == ["local/r0", "local/r1"]
    reads = {name: lambda name=name: gw.ld.instance(name)["gateway"] for name in ("r0", "r1")}
    with peaks(reads) as seen, ThreadPoolExecutor(4) as pool:
        outcomes = list(pool.map(lambda _: stream(gw), range(16)))
    assert outcomes == ["done"] * 16
    served = Counter(r["instance"] for r in activity(gw, 16))
    assert min(served["r0"], served["r1"]) >= 2, served
    for name in ("r0", "r1"):  # one slot each: the rest waited at the gateway
        assert seen[name] == 1, seen
        assert seen[name + "-queued"] == 0, seen


def test_a_conversation_stays_on_its_replica_and_reuses_its_cache(gw: Gw) -> None:
    talks, homes = replica_helpers.converse(gw.base, "xy", 3, "instance", SYSTEM)
    assert all(len(h) == 1 for h in homes.values()), homes
    last = chat(gw, [*talks["x"], {"role": "user", "content": "and then?"}])
    assert last["timings"]["cache_n"] > 0, "the cached prefix was reused"


def test_a_killed_replica_loses_no_plain_request_and_is_skipped_until_back(gw: Gw) -> None:
    statuses: list[int] = []
    streams: list[str] = []

    def plain() -> None:
        for _ in range(8):
            body = {"model": "shared", "max_tokens": 24,
                    "messages": [{"role": "user", "content": "count"}]}  # fmt: skip
            r = httpx.post(f"{gw.base}/v1/chat/completions", json=body, timeout=60)
            statuses.append(r.status_code)

    def streamed() -> None:
        for _ in range(6):
            streams.append(stream(gw, 24))

    victim = gw.ld.running("r1")
    assert victim is not None
    with ThreadPoolExecutor(4) as pool:
        jobs = [pool.submit(plain) for _ in range(3)] + [pool.submit(streamed)]
        wait_for(
            lambda: {"r0", "r1"} <= {r["instance"] for r in activity(gw, 1)}, 30, "both serving"
        )
        os.kill(victim, signal.SIGKILL)
        for job in jobs:
            job.result(timeout=120)
    assert statuses == [200] * 24, Counter(statuses)  # nothing lost before the first byte
    assert set(streams) <= {"done", "error"}, Counter(streams)  # a cut stream says so
    gw.ld.wait_running("r1", timeout=60, not_pid=victim)  # the supervisor brought it back

    def both_again() -> bool:
        with ThreadPoolExecutor(2) as pool:
            list(pool.map(lambda _: stream(gw, 16), range(4)))
        return {"r0", "r1"} <= {r["instance"] for r in activity(gw, 4)[-4:]}

    wait_for(both_again, 60, "r1 serving again")


def test_ollama_clients_and_pass_through_reach_the_alias(gw: Gw) -> None:
    with ollama.Client(host=gw.base, timeout=60) as client:
        answer = client.chat(
            model="shared", messages=[{"role": "user", "content": "hi"}], options={"num_predict": 4}
        )
        assert answer.message.role == "assistant"
        # Ollama names are case-insensitive: the alias too, as every other name.
        again = client.generate(model="Shared:latest", prompt="hi", options={"num_predict": 2})
        assert again.done
        tags = [m.model for m in client.list().models]
        assert tags.count("shared:latest") == 1, tags
        assert client.show("shared").modelinfo is not None
        assert sorted(m.model or "" for m in client.ps().models) == ["r0:latest", "r1:latest"]
    body = {"model": "SHARED", "prompt": "hi", "max_tokens": 2}
    assert httpx.post(f"{gw.base}/v1/completions", json=body, timeout=60).status_code == 200
    for path in ("/props?model=shared", "/upstream/shared/slots"):
        assert httpx.get(f"{gw.base}{path}", timeout=10).status_code == 200, path
    # keep_alive 0 by the alias leaves always-on replicas up (Ollama's rule for them).
    body = {"model": "shared", "messages": [], "keep_alive": 0}
    assert httpx.post(f"{gw.base}/api/chat", json=body, timeout=30).status_code == 200
    assert {gw.state("r0"), gw.state("r1")} == {"running"}


def test_a_replica_busy_past_the_gateway_gets_none_of_its_requests(gw: Gw) -> None:
    """A client streaming straight to r0's own port fills its one slot: the gateway reads
    r0's /slots and sends every request by the alias to r1, none queueing inside r0."""
    port = gw.ld.instance("r0")["port"]
    body = {"prompt": "hi", "n_predict": 4000, "ignore_eos": True, "stream": True}
    stop = threading.Event()

    def hog() -> None:
        url = f"http://127.0.0.1:{port}/completion"
        with httpx.stream("POST", url, json=body, timeout=120) as r:
            for _ in r.iter_lines():
                if stop.is_set():
                    return  # closing the stream frees the slot

    def server(name: str) -> Any:
        return gw.ld.instance(name)["gateway"]["server"]

    wait_for(lambda: server("r1") is not None, 10, "the gateway reading r1's slots")
    reads = {name: lambda name=name: gw.ld.instance(name)["gateway"] for name in ("r0", "r1")}
    with ThreadPoolExecutor(1) as pool:
        hogging = pool.submit(hog)
        try:
            # The gateway's own read of r0's slots shows the direct stream: wait for that.
            wait_for(lambda: (server("r0") or {}).get("processing") == 1, 30, "r0 seen busy")
            with peaks(reads) as seen:
                for _ in range(4):
                    chat(gw, [{"role": "user", "content": "hi"}])
        finally:
            stop.set()
            hogging.result(timeout=60)
    served = Counter(r["instance"] for r in activity(gw, 4))
    assert served == {"r1": 4}, served
    assert seen["r0"] == 0, seen


def test_a_turn_waits_for_its_busy_replica_only_when_its_cache_pays(gw: Gw) -> None:
    """r0 and r1 one slot each. A long conversation's next turn, while the replica its
    server reported holding it is busy, waits for that replica (its prefill there is the
    new turn alone, where r1 would read the whole prompt); a short one's goes to the free
    replica at once, its few cached tokens not worth a wait."""
    # The model's measured speed: short requests (about 0.2 s each on this machine, idle),
    # whose prompts say how fast it reads. The long conversation's ~800 cached tokens take
    # several times a request's time to read again; the short one's ~20, a fraction of it.
    for n in range(4):
        replica_helpers.chat(
            gw.base, [{"role": "user", "content": f"{n}: hello, how are you?"}], 24
        )
    long_talk = [{"role": "system", "content": "L. " + SYSTEM * 3},
                 {"role": "user", "content": "turn 0: go on"}]  # fmt: skip
    short_talk = [{"role": "system", "content": "S."}, {"role": "user", "content": "go"}]
    for talk, cached_at_least, waits in ((long_talk, 400, True), (short_talk, 1, False)):
        first = chat(gw, talk)
        holder = _record_of(gw, first)["instance"]
        talk.append({"role": "assistant", "content": first["choices"][0]["message"]["content"]})
        with ThreadPoolExecutor(1) as pool:
            # The same prompt again, generating long: it goes to the holder and keeps it busy.
            busy = pool.submit(_generate, gw, talk[:2], 150)
            wait_for(lambda h=holder: _in_flight(gw, h) == 1, 30, f"{holder} busy")
            reply = chat(gw, [*talk, {"role": "user", "content": "turn 1: and?"}])
            busy.result(timeout=60)
        record = _record_of(gw, reply)
        weighed = (record, gw.ld.instance(holder)["gateway"]["speed"])  # what was weighed
        if waits:
            assert record["instance"] == holder, weighed
            assert reply["timings"]["cache_n"] >= cached_at_least, reply["timings"]
            assert record["queue_s"] > 0, record  # it waited at the gateway for its slot
        else:
            assert record["instance"] != holder, weighed
    # What the choices weighed, measured from the answers, in each replica's status.
    speed = gw.ld.instance("r0")["gateway"]["speed"]["shared"]
    assert speed["prompt_tokens_per_s"] > 0
    assert speed["request_s_p50"] > 0


def _generate(gw: Gw, messages: list[dict[str, str]], tokens: int) -> None:
    body = {"model": "shared", "messages": messages, "max_tokens": tokens, "ignore_eos": True}
    reply = httpx.post(f"{gw.base}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text


def _in_flight(gw: Gw, name: str) -> int:
    return int(gw.ld.instance(name)["gateway"]["in_flight"])


def _record_of(gw: Gw, reply: dict[str, Any]) -> dict[str, Any]:
    """The newest activity record of a request that answered `reply` (told apart from
    the long generation beside it by its counts)."""
    usage = reply["usage"]

    def found() -> dict[str, Any] | None:
        data = httpx.get(f"{gw.base}/v1/activity?model=shared", timeout=5).json()["data"]
        return next(
            (r for r in data if (r["prompt_tokens"], r["completion_tokens"])
             == (usage["prompt_tokens"], usage["completion_tokens"])),
            None,
        )  # fmt: skip

    record: dict[str, Any] = wait_for(found, 10, "the request's activity record")
    return record
