"""The same bytes read by the listener's `Reader` and by h11's server side, each to an
`Outcome`: the requests read whole (method, target, headers, body) and how the bytes
ended (read, refused, or a request still incomplete)."""

from __future__ import annotations

from dataclasses import dataclass, field

import h11

from llamad.listener.limits import Limits, Refusal
from llamad.listener.reader import Head, Invalid, Reader, Upgraded

Headers = list[tuple[bytes, bytes]]


@dataclass
class Request:
    method: bytes
    target: bytes
    headers: Headers
    body: bytes = b""


@dataclass
class Outcome:
    requests: list[Request] = field(default_factory=list)
    end: str = "read"  # "read", "refused", "incomplete" or "upgrade"
    why: str = ""  # the refusal, for a failing test's message

    def same(self, other: Outcome) -> bool:
        return (self.requests, self.end) == (other.requests, other.end)


class Requests:
    """The connection's side of the reader (`reader.Requests`), recording what it reads."""

    limits = Limits()

    def __init__(self) -> None:
        self.outcome = Outcome()
        self.open = self.partial = False  # a request begun; its head read, not its end

    def begin(self) -> None:
        self.open = True

    def head(self, head: Head) -> None:
        target = head.raw_path + (b"?" + head.query if head.query else b"")
        self.outcome.requests.append(Request(head.method.encode(), target, head.headers))
        self.partial = True

    def body(self, data: bytes) -> None:
        self.outcome.requests[-1].body += data

    def end(self) -> None:
        self.open = self.partial = False


def listener(data: bytes, cut: int | None = None) -> Outcome:
    """What the listener reads of `data` (fed in two pieces at `cut`)."""
    requests = Requests()
    reader = Reader(requests)
    pieces = [data] if cut is None else [data[:cut], data[cut:]]
    try:
        for piece in pieces:
            reader.feed(piece)
    except Upgraded:
        requests.outcome.end = "upgrade"
    except (Refusal, Invalid) as why:
        requests.outcome.end, requests.outcome.why = "refused", repr(why)
    else:
        if requests.open:
            requests.outcome.end = "incomplete"
    if requests.partial:
        requests.outcome.requests.pop()  # only requests read whole are compared
    return requests.outcome


def reference(data: bytes) -> Outcome:
    """What h11 (a server, with the listener's head limit) reads of `data`."""
    conn = h11.Connection(h11.SERVER, max_incomplete_event_size=Limits().max_head)
    conn.receive_data(data)
    outcome, current = Outcome(), None
    while True:
        try:
            event = conn.next_event()
        except h11.RemoteProtocolError as exc:
            outcome.end, outcome.why = "refused", str(exc)
            return outcome
        if isinstance(event, h11.Request):
            target = event.target
            current = Request(event.method, target, [(n, v) for n, v in event.headers.raw_items()])
            current.headers = [(n.lower(), v) for n, v in current.headers]
        elif isinstance(event, h11.Data):
            assert current is not None
            current.body += bytes(event.data)
        elif isinstance(event, h11.EndOfMessage):
            assert current is not None
            outcome.requests.append(current)
            current = None
            if conn.their_state is h11.MIGHT_SWITCH_PROTOCOL:
                outcome.end = "upgrade"  # nothing after it is HTTP to us
                return outcome
            conn.send(h11.Response(status_code=200, headers=[(b"content-length", b"0")]))
            conn.send(h11.EndOfMessage())
            if conn.our_state is h11.MUST_CLOSE:
                return outcome  # what follows a last request is dropped, as the reader does
            conn.start_next_cycle()
        elif event is h11.PAUSED:
            return outcome  # an upgrade or CONNECT: nothing after it is HTTP to us
        else:  # NEED_DATA: all of `data` is read
            if current is not None or conn.trailing_data[0]:
                outcome.end = "incomplete"
            return outcome
