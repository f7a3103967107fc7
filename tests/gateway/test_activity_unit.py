"""The activity ring, the usage read from an answer's end, and the event bus, alone."""

from __future__ import annotations

import asyncio
import json

import pytest

from llamad.cli.stop_lines import stop_lines
from llamad.gateway.admission.rules import StopCause
from llamad.gateway.books.activity import Activity, Tally
from llamad.gateway.books.activity_stats import KeyTotals, model_rates
from llamad.gateway.books.bus import EventBus
from llamad.gateway.books.recent_stops import KEPT, RecentStops
from llamad.gateway.books.usage import from_chunks, from_fields, from_tail

pytestmark = pytest.mark.timeout(20)

FINAL = (
    b'data: {"choices":[{"finish_reason":"length","index":0,"delta":{}}],"object":'
    b'"chat.completion.chunk","usage":{"completion_tokens":3,"prompt_tokens":53,'
    b'"total_tokens":56,"prompt_tokens_details":{"cached_tokens":52}},"timings":{"cache_n":52,'
    b'"prompt_n":1,"prompt_ms":0.6,"predicted_n":3,"predicted_ms":0.2,'
    b'"predicted_per_second":15000.0}}\n\ndata: [DONE]\n\n'
)


def _record(i: int, model: str = "m", key: str | None = None) -> Tally:
    t = Tally(route="/v1/chat/completions", client="127.0.0.1", key=key, began=0.0, wall=i)
    t.model = t.instance = model
    t.status = 200
    t.usage = from_fields(
        {"predicted_per_second": 10.0 + i}, {"prompt_tokens": 2, "completion_tokens": 3}
    )
    return t


def test_the_ring_stays_bounded_and_lists_newest_first() -> None:
    activity = Activity(lambda: 1000)
    for i in range(10_000):
        activity.add(_record(i, "a" if i % 2 else "b").record(1.0))
    assert len(activity) == 1000
    recent = activity.recent()
    assert recent[0].time == 9999
    assert recent[-1].time == 9000
    assert {r.model for r in activity.recent("a")} == {"a"}
    assert len(activity.recent(limit=5)) == 5


def test_a_smaller_size_on_reload_keeps_the_newest() -> None:
    size = [10]
    activity = Activity(lambda: size[0])
    for i in range(10):
        activity.add(_record(i).record(1.0))
    size[0] = 3
    activity.add(_record(10).record(1.0))
    assert [r.time for r in activity.recent()] == [10, 9, 8]


def test_usage_is_read_from_the_last_chunks_even_when_split() -> None:
    cut = len(FINAL) // 2
    usage = from_tail(FINAL[:cut] + FINAL[cut:])
    assert (usage.prompt_tokens, usage.completion_tokens, usage.tokens_per_s) == (53, 3, 15000.0)
    # A stream without include_usage: the timings count, cached prompt tokens included.
    only_timings = FINAL.replace(b'"usage"', b'"other"')
    assert from_tail(only_timings).prompt_tokens == 53
    assert from_tail(b"data: [DONE]\n\n").completion_tokens is None
    # A long answer: only its end is looked at, however the chunks fell.
    long = b'{"content": "' + b"x" * 100_000 + b'",' + FINAL[FINAL.index(b'"usage"') :]
    assert from_chunks(long[:50_000], long[50_000:]).completion_tokens == 3
    assert from_chunks(long[:-100], long[-100:]).completion_tokens == 3
    assert from_tail(b'{"text": "the word \\"usage\\": {"}').prompt_tokens is None


def test_an_anthropic_stream_says_its_prompt_in_its_first_event() -> None:
    start = (
        b'event: message_start\ndata: {"type":"message_start","message":{"content":[],'
        b'"usage":{"cache_read_input_tokens":7,"input_tokens":5,"output_tokens":0}}}\n\n'
    )
    end = (
        b'event: message_delta\ndata: {"type":"message_delta","delta":{},'
        b'"usage":{"output_tokens":2}}\n\nevent: message_stop\ndata: {}\n\n'
    )
    for first, prev, last in ((start, b"", end), (start + end, b"", start + end)):
        u = from_chunks(prev, last, first)
        assert (u.prompt_tokens, u.cached_tokens, u.evaluated_tokens) == (12, 7, 5)
        assert u.completion_tokens == 2
    # An OpenAI stream's end says it all: its first chunk is never looked at.
    assert from_chunks(b"", FINAL, start).cached_tokens == 52


def test_key_totals_and_rates() -> None:
    totals = KeyTotals()
    activity = Activity(lambda: 100, [totals])
    for i in range(3):
        activity.add(_record(1000 + i, key="alice").record(1.0))
    assert totals.to_dict()["alice"] == {
        "requests": 3, "errors": 0, "prompt_tokens": 6, "completion_tokens": 9,
    }  # fmt: skip
    rates = model_rates(activity, now=1030)
    assert rates["m"]["requests_per_min"] == 3
    assert rates["m"]["tokens_per_s"] == 1011.0
    assert rates["m"]["cache_hit_ratio"] is None  # no request said what it had cached
    hit = _record(1003)
    hit.usage = from_tail(FINAL)
    activity.add(hit.record(1.0))
    assert model_rates(activity, now=1030)["m"]["cache_hit_ratio"] == round(52 / 53, 4)


@pytest.mark.parametrize(
    ("timings", "usage", "expected"),
    [
        # llama-server's own counts win: the prompt is the evaluated and the cached.
        ({"cache_n": 52, "prompt_n": 1}, None, (53, 52, 1)),
        ({"cache_n": 52, "prompt_n": 1}, {"prompt_tokens": 53}, (53, 52, 1)),
        # OpenAI's usage alone.
        (None, {"prompt_tokens": 53, "prompt_tokens_details": {"cached_tokens": 50}}, (53, 50, 3)),
        (None, {"prompt_tokens": 53}, (53, None, None)),
        # Anthropic's: input_tokens is what was evaluated, beside what was read from cache.
        (None, {"input_tokens": 5, "cache_read_input_tokens": 67}, (72, 67, 5)),
        (None, {"output_tokens": 5}, (None, None, None)),  # a stream's last event
    ],
)
def test_the_prompt_is_split_into_cached_and_evaluated(
    timings: dict[str, int] | None,
    usage: dict[str, object] | None,
    expected: tuple[int | None, int | None, int | None],
) -> None:
    u = from_fields(timings, usage)
    assert (u.prompt_tokens, u.cached_tokens, u.evaluated_tokens) == expected


async def test_a_slow_subscriber_is_dropped_and_never_blocks() -> None:
    bus = EventBus(backlog=4)
    slow, fast = bus.subscribe(), bus.subscribe()
    for i in range(10):
        bus.publish("request", {"i": i})
        fast.pending.clear()  # a reader that keeps up
    assert slow.dropped
    assert bus.dropped == 1
    assert bus.subscribers == 1
    await asyncio.wait_for(slow.wait(5), 1)  # woken at once, to say goodbye
    event = fast.pending or [b""]
    bus.publish("state", {"model": "m"})
    data = fast.pending[-1].split(b"data: ")[1]
    assert json.loads(data)["model"] == "m"
    assert event is not None


def test_a_limited_subscriber_gets_only_its_models_events() -> None:
    bus = EventBus()
    sub = bus.subscribe(frozenset({"a"}))
    bus.publish("state", {"model": "b", "to": "running"})
    bus.publish("request", {"model": "alias-of-a", "instance": "a"})
    bus.publish("notice", {})
    assert [json.loads(e.split(b"data: ")[1])["type"] for e in sub.pending] == ["request", "notice"]


def test_a_stop_names_the_model_it_made_room_for_only_to_those_who_may_see_it() -> None:
    bus = EventBus()
    limited, both, everyone = (
        bus.subscribe(frozenset({"a"})), bus.subscribe(frozenset({"a", "b"})), bus.subscribe()
    )  # fmt: skip
    bus.publish("stop", {"model": "a", "reason": "evict", "cause": "memory", "for_model": "b"})
    told = [json.loads(s.pending[0].split(b"data: ")[1]) for s in (limited, both, everyone)]
    assert [t["for_model"] for t in told] == [None, "b", "b"]
    assert {t["cause"] for t in told} == {"memory"}


def test_recent_stops_are_bounded_and_newest_first() -> None:
    recent = RecentStops(clock=lambda: 5.0)
    for i in range(KEPT + 3):
        recent.add(f"m{i}", "evict", StopCause("memory", "x").fields())
    kept = recent.to_list()
    assert len(kept) == KEPT
    assert kept[0] == {
        "model": f"m{KEPT + 2}", "reason": "evict", "cause": "memory", "for_model": "x",
        "set": None, "at": 5.0,
    }  # fmt: skip


def test_llamactl_says_why_each_model_stopped() -> None:
    doc = {"gateway": {"recent_stops": [
        {"model": "coder", "cause": "exclusive", "for_model": "llama", "set": "big", "at": 40.0},
        {"model": "fim", "cause": "group", "for_model": "llama", "set": "coder", "at": 40.0},
        {"model": "chat", "reason": "idle_timeout", "cause": "idle_timeout", "at": 10.0},
    ]}}  # fmt: skip
    assert stop_lines(doc, now=100.0) == [
        "recent stops:",
        "  coder   1m00s ago  evicted: llama is in exclusive set big with it",
        "  fim     1m00s ago  stopped with its group coder, for llama",
        "  chat    1m30s ago  idle timeout",
    ]
    assert stop_lines({"gateway": {}}) == []
