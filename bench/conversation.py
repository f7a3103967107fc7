"""The real model's conversations for the returning rows: a long first message then
short turns, each a 1-token answer, and Claude-Code-shaped Anthropic turns."""

from __future__ import annotations

from typing import Any

from bench import realmodel_client as rc


class Conversation:
    """A long first message, then short turns; each turn's 1-token answer timed."""

    def __init__(self, sentences: int) -> None:
        text = f"{rc.story(sentences)}\nRemember the log; I will ask about it."
        self.messages: list[dict[str, str]] = [{"role": "user", "content": text}]
        self.turns = 0
        self.last = 0  # prompt tokens of the latest turn

    def next(self, gw: int, cache: bool = True) -> tuple[rc.Turn, int]:
        """Send the next turn; (its answer, the tokens it added to the conversation)."""
        if self.turns:
            day = self.turns * 3
            self.messages += [
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": f"How many ships on day {day}? Just the number."},
            ]
        self.turns += 1
        turn = rc.first_token(gw, "gemma", self.messages, cache)
        added, self.last = turn.prompt - self.last, turn.prompt
        return turn, added


def sentences(port: int, size: int) -> int:
    """Story lines for a conversation of about `size` tokens: guessed, then corrected."""
    guess = max(1, round(size / (rc.tokens(port, rc.story(20)) / 20)))
    return max(1, round(guess * size / rc.tokens(port, rc.story(guess))))


BILLING = "x-anthropic-billing-header: cc_version=2.1.42.834; cc_entrypoint=cli; cch={};"


def claude_turns(gw: int, system: str) -> tuple[int, int]:
    """Two Anthropic turns, the billing block's `cch` changed between them:
    (the second's tokens evaluated, the tokens it added), from /v1/activity."""
    messages: list[dict[str, str]] = [{"role": "user", "content": "What is this log about?"}]
    seen: list[dict[str, Any]] = []
    for cch in ("65abc", "1f0e2"):
        body = {
            "model": "gemma",
            "max_tokens": 1,
            "temperature": 0,
            "system": [
                {"type": "text", "text": BILLING.format(cch)},
                {"type": "text", "text": system},
            ],
            "messages": messages,
        }
        rc.post(gw, "/v1/messages", body, {"anthropic-version": "2023-06-01"})
        seen.append(rc.get_json(gw, "/v1/activity")["data"][0])
        messages = [*messages, {"role": "assistant", "content": "A lighthouse."},
                    {"role": "user", "content": "Which day had the most ships?"}]  # fmt: skip
    total = [int(r["prompt_cached"] or 0) + int(r["prompt_evaluated"] or 0) for r in seen]
    return int(seen[1]["prompt_evaluated"] or 0), total[1] - total[0]
