"""A forced call's generated text told as tool-call deltas as it comes (shaping/deltas.py):
with several tools, the name read first and the wrapper's closing brace never sent."""

from __future__ import annotations

import json
from typing import Any

from llamad.gateway.shaping.deltas import Call
from llamad.gateway.shaping.forced import ANY_OBJECT, Tool

TWO = [Tool("a", ANY_OBJECT), Tool("f", ANY_OBJECT)]


def _told(call: Call, text: str, finish: str = "stop") -> list[dict[str, Any]]:
    """The choices `call` makes of `text` sent a character at a time, then the finish."""
    out = [call.choice({"index": 0, "delta": {"role": "assistant", "content": None}})]
    out += [call.choice({"index": 0, "delta": {"content": ch}}) for ch in text]
    out.append(call.choice({"index": 0, "delta": {}, "finish_reason": finish}))
    return [c for c in out if c is not None]


def _arguments(choices: list[dict[str, Any]]) -> tuple[list[str], str]:
    calls = [t for c in choices for t in c["delta"].get("tool_calls") or []]
    names = [t["function"]["name"] for t in calls if "name" in t["function"]]
    return names, "".join(t["function"]["arguments"] for t in calls)


def test_one_of_several_tools_streams_its_arguments_alone() -> None:
    text = '{"name":"f","arguments":{"ok":true,"n":{"m":1}}}'
    choices = _told(Call(TWO), text)
    names, arguments = _arguments(choices)
    assert names == ["f"]
    assert json.loads(arguments) == {"ok": True, "n": {"m": 1}}
    assert len([c for c in choices if c["delta"].get("tool_calls")]) > 10
    assert choices[-1]["finish_reason"] == "tool_calls"


def test_spaced_text_and_a_single_tool() -> None:
    spaced = '{ "name" : "a" ,\n "arguments" : { "x": [1, 2] } \n}'
    assert json.loads(_arguments(_told(Call(TWO), spaced))[1]) == {"x": [1, 2]}
    single = _told(Call([Tool("g", ANY_OBJECT)]), '{"x":1}')
    assert _arguments(single) == (["g"], '{"x":1}')


def test_a_name_after_the_arguments_comes_whole_at_the_end() -> None:
    choices = _told(Call(TWO), '{"arguments":{"ok":false},"name":"a"}')
    names, arguments = _arguments(choices)
    assert names == ["a"]
    assert json.loads(arguments) == {"ok": False}
    assert choices[-1]["finish_reason"] == "tool_calls"


def test_a_call_cut_short_keeps_its_finish() -> None:
    choices = _told(Call(TWO), '{"name":"f","arguments":{"ok"', finish="length")
    assert _arguments(choices) == (["f"], '{"ok"')
    assert choices[-1]["finish_reason"] == "length"


def test_text_no_grammar_held_to_is_told_as_text_not_a_failure() -> None:
    """A backend that ignores the grammar may write a name JSON cannot read (`"\\q"`) or
    one no tool has: no call is made of it, nothing raises, and the text comes at the
    end, as a whole answer has it."""
    for text in ('{"name": "\\q", "arguments": {"ok": true}}', '{"name": "zz", "arguments": {}}'):
        choices = _told(Call(TWO), text)
        assert _arguments(choices)[0] == []
        assert choices[-1]["finish_reason"] == "stop"
        assert "".join(c["delta"].get("content") or "" for c in choices) == text
