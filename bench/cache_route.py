"""Two replicas of a one-slot model, and where a conversation's turns go (#50 item 6).

One llamad, two instances of the mid-sized chat model (`fleet_chat.SHAPE`, one slot and
one thread each) sharing the alias `pair`. First, 8 clients send short prompts: both
replicas must serve (the busier one's share of the requests is judged). Then a long
conversation (a system prompt of about 3,000 tokens) takes turns while the 8 clients keep
both replicas busy: each turn should go to the replica whose server reported holding the
conversation, waiting for its one slot where that is sooner than a cold prefill of the
whole prompt on the other. The row counts the turns not served where the last one was,
against the same conversation with affinity off (`x-llamad-affinity: off`) as the floor,
and notes each turn's `cache_n` and wait at the gateway.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx

from bench import fleet_chat
from bench.common import Context, Result, wait_for
from bench.procs import Daemon
from llamad.daemon.tinymodel import write_tiny_model

ALIAS, NAMES = "pair", ("pair-0", "pair-1")
CLIENTS = 8
SYSTEM = "You are a careful assistant. Keep to the facts you are given, and say so. " * 40


def run(ctx: Context) -> list[Result]:
    """The two rows, from one llamad started for them."""
    model = write_tiny_model(ctx.root / "chat.gguf", shape=fleet_chat.SHAPE)
    keys = {"model": model, "threads": 1, "n_parallel": 1, "ctx_size": fleet_chat.CTX,
            "aliases": [ALIAS]}  # fmt: skip
    gw = ctx.port()
    instances: dict[str, dict[str, object]] = {n: {**keys, "port": ctx.port()} for n in NAMES}
    daemon = Daemon(ctx, "cache-route", instances, gateway={"listen": f"127.0.0.1:{gw}"})
    url = f"http://127.0.0.1:{gw}"
    try:
        daemon.wait_running(list(NAMES), timeout=120.0)
        wait_for(lambda: daemon.events("gateway.listening"), 60, "the gateway listening")
        return [_both_serve(ctx, url), _turns(ctx, url)]
    finally:
        daemon.stop()


def _short(client: httpx.Client, url: str, n: int) -> dict[str, Any]:
    body = {"model": ALIAS, "max_tokens": 8,
            "messages": [{"role": "user", "content": f"{n}: say something short"}]}  # fmt: skip
    reply = client.post(f"{url}/v1/chat/completions", json=body)
    reply.raise_for_status()
    return dict(reply.json())


def _both_serve(ctx: Context, url: str) -> Result:
    """8 clients, short prompts: the busier replica's share of the requests."""
    total = ctx.reps(96, 32)
    with httpx.Client(timeout=120) as client, ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(lambda n: _short(client, url, n), range(total)))
        records = _records(client, url, total)
    served = Counter(r["instance"] for r in records)
    share = max(served.values()) / total
    return Result(
        "cache route: 8 clients, short prompts, the busier one-slot replica's share", total,
        "share", [share], [0.5], "ratio", "median", 0.9, "<= 0.9 (both serve)",
        f"requests per replica {dict(served)}",
    )  # fmt: skip


def _turns(ctx: Context, url: str) -> Result:
    """A long conversation's turns under the 8 clients' load, with affinity and without:
    the turns not served where the one before was."""
    turns = ctx.reps(8, 4)
    seen = {mode: _conversation(url, mode, turns) for mode in ("affinity", "balance")}
    moved = {mode: float(sum(a != b for a, b in itertools.pairwise(w)))
             for mode, (w, _, _, _) in seen.items()}  # fmt: skip
    where, cached, waited, took = seen["affinity"]
    _, other, _, slow = seen["balance"]
    return Result(
        "cache route: a long conversation's turns moved off its replica, under load",
        turns - 1, "turns", [moved["affinity"]], [moved["balance"]], "overhead", "median",
        0.0, "0 (each turn where its cache is)",
        f"with affinity: replicas {where}, cache_n {cached}, waited s {waited}, turn s "
        f"{took}; without: replicas {seen['balance'][0]}, cache_n {other}, turn s {slow}",
        extra={"affinity": seen["affinity"], "balance": seen["balance"]},
    )  # fmt: skip


Seen = tuple[list[str], list[int], list[float], list[float]]


def _conversation(url: str, mode: str, turns: int) -> Seen:
    """Its turns, the first alone and the rest beside 8 clients' short prompts: per turn
    the replica that served it, its `cache_n`, its wait at the gateway and its whole
    time through the gateway (s)."""
    headers = {"x-llamad-affinity": "off"} if mode == "balance" else {}
    talk = [{"role": "system", "content": f"{mode}. {SYSTEM}"}]
    where: list[str] = []
    cached: list[int] = []
    waited: list[float] = []
    took: list[float] = []
    stop = threading.Event()
    with httpx.Client(timeout=300) as client, ThreadPoolExecutor(CLIENTS) as pool:

        def load(k: int) -> None:
            n = 0
            while not stop.is_set():
                _short(client, url, k * 100000 + n)
                n += 1

        try:
            for turn in range(turns):
                if turn == 1:  # the first turn alone: it is held where it was read
                    for k in range(CLIENTS):
                        pool.submit(load, k)
                talk.append({"role": "user", "content": f"Question {turn}?"})
                body = {"model": ALIAS, "messages": talk, "max_tokens": 12}
                reply = client.post(f"{url}/v1/chat/completions", json=body, headers=headers)
                reply.raise_for_status()
                answer = reply.json()
                talk.append(
                    {"role": "assistant", "content": answer["choices"][0]["message"]["content"]}
                )
                record = _record_of(client, url, answer["usage"]["prompt_tokens"])
                where.append(record["instance"])
                cached.append(int(answer["timings"].get("cache_n", 0)))
                waited.append(round(record["queue_s"], 3))
                took.append(round(record["duration_s"], 3))
        finally:
            stop.set()
    return where, cached, waited, took


def _records(client: httpx.Client, url: str, count: int) -> list[dict[str, Any]]:
    def enough() -> list[dict[str, Any]] | None:
        data = client.get(f"{url}/v1/activity?model={ALIAS}&limit={count}").json()["data"]
        return data if len(data) >= count else None

    found: list[dict[str, Any]] = wait_for(enough, 30, f"{count} requests in the activity")
    return found[:count]


def _record_of(client: httpx.Client, url: str, prompt_tokens: int) -> dict[str, Any]:
    """The newest record of the request whose prompt had `prompt_tokens` tokens."""

    def found() -> dict[str, Any] | None:
        data = client.get(f"{url}/v1/activity?model={ALIAS}&limit=200").json()["data"]
        return next((r for r in data if r["prompt_tokens"] == prompt_tokens), None)

    record: dict[str, Any] = wait_for(found, 30, "the turn's activity record")
    return record
