"""One choice of a shaped stream, told as llama-server writes it: each of its chunks
rewritten for the client (the choice's index, one id and the name asked for, the echoed
prompt first, a forced call's arguments as tool-call deltas), its usage kept aside."""

from __future__ import annotations

import json
import re
from typing import Any

from llamad.gateway.shaping.answers import new_id
from llamad.gateway.shaping.forced import Tool, parse
from llamad.gateway.shaping.plan import Shape
from llamad.gateway.shaping.prompt_tokens import with_prompt

# The start of a call to one of several tools, up to its arguments (forced.schema).
_HEAD = re.compile(r'\s*\{\s*"name"\s*:\s*("(?:[^"\\]|\\.)*")\s*,\s*"arguments"\s*:\s*')
_SPENT = ("usage", "timings", "choices")


def _name(text: str) -> str | None:
    try:
        name = json.loads(text)
    except ValueError:
        return None
    return name if isinstance(name, str) else None


class Call:
    """A forced call's generated text as OpenAI's tool-call deltas, arguments passed on
    as they come. With several tools the text is `{"name": ..., "arguments": {...}}`:
    the arguments start once the name is read, and their last character waits for the
    next, so the wrapper's closing brace is never sent."""

    def __init__(self, tools: list[Tool]) -> None:
        self.tools, self.text, self.sent, self.begun = tools, "", 0, False
        self.names = {t.name for t in tools}
        self.name: str | None = tools[0].name if len(tools) == 1 else None
        self.id = new_id("call_")

    def _arguments(self, finish: Any) -> str:
        if len(self.tools) == 1:
            return self.text
        head = _HEAD.match(self.text)
        if head is None or (name := _name(head.group(1))) not in self.names:
            return ""  # not (yet) a call to one of them: a backend may not hold to the grammar
        self.name = name
        rest = self.text[head.end() :]
        if finish == "stop":  # whole: the wrapper's brace ends it
            return rest.rstrip().removesuffix("}")
        return rest if finish else rest.rstrip()[:-1]

    def choice(self, choice: dict[str, Any]) -> dict[str, Any] | None:
        """The client's choice for one of llama-server's (None: nothing to send yet)."""
        delta = dict(choice.get("delta") or {})
        piece, finish = delta.pop("content", None), choice.get("finish_reason")
        if piece is None and "role" in delta:
            delta["content"] = None
        self.text += piece if isinstance(piece, str) else ""
        arguments = self._arguments(finish)
        new, self.sent = arguments[self.sent :], max(self.sent, len(arguments))
        if self.name is not None and (new or not self.begun):
            call: dict[str, Any] = {"index": 0, "function": {"arguments": new}}
            if not self.begun:
                call.update(id=self.id, type="function")
                call["function"]["name"] = self.name
            delta["tool_calls"], self.begun = [call], True
        elif finish and not self.begun and (whole := parse(self.text, self.tools)):
            function = {"name": whole[0], "arguments": json.dumps(whole[1], ensure_ascii=False)}
            delta["tool_calls"] = [
                {"index": 0, "id": self.id, "type": "function", "function": function}
            ]
            self.begun = True
        elif finish and not self.begun and self.text:
            delta["content"] = self.text  # no call after all: the text, as a whole answer has it
        if not delta and not finish:
            return None
        out = {**choice, "delta": delta}
        out["finish_reason"] = "tool_calls" if finish == "stop" and self.begun else finish
        return out


class Choice:
    """Choice `index` of a shaped stream, from llama-server's stream for it."""

    def __init__(self, shape: Shape, index: int, asked: str, rid: str) -> None:
        self.shape, self.index, self.asked, self.rid = shape, index, asked, rid
        self.call = Call(shape.tools) if shape.tools else None
        self.started = False
        self.end: dict[str, Any] = {}  # its usage and timings, from its last chunks

    def chunks(
        self, doc: dict[str, Any], prompt: list[dict[str, Any]] | None = None
    ) -> list[dict[str, Any]]:
        """The client's chunks for one of llama-server's (`prompt`: the echoed prompt's
        logprobs entries, when asked for)."""
        for key in ("usage", "timings"):
            if isinstance(doc.get(key), dict):
                self.end[key] = doc[key]
        base = {k: v for k, v in doc.items() if k not in _SPENT}
        base.update(id=self.rid, model=self.asked)
        out = []
        if not self.started and self.shape.echo is not None:
            said = None if prompt is None else with_prompt(None, prompt)
            first = {"text": self.shape.echo, "index": self.index, "logprobs": said}
            out.append({**base, "choices": [{**first, "finish_reason": None}]})
        self.started = True
        for choice in doc.get("choices") or []:
            mine: dict[str, Any] | None = {**choice, "index": self.index}
            if self.call is not None:
                mine = self.call.choice({**choice, "index": self.index})
            if mine is not None:
                out.append({**base, "choices": [mine]})
        return out
