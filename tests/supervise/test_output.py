"""supervise.output: a child's output read in gathers, whole, and never holding it up."""

from __future__ import annotations

import sys

import pytest

from llamad.supervise.output import Output
from llamad.supervise.process import Child

# A line every 5 ms for half a second: read as it came, a hundred reads.
TRICKLE = "import sys, time\nfor i in range(100):\n    print(i, flush=True)\n    time.sleep(0.005)"
# 8 MiB as fast as it can: more than a widened pipe holds, so reading must not pause.
FLOOD = "import sys\nline = 'x' * 1023 + '\\n'\nfor _ in range(8192):\n    sys.stdout.write(line)"


async def _run(code: str) -> tuple[list[str], list[str]]:
    """What the child's writer got, a call per read, and the tail at its exit."""
    writes: list[str] = []

    def write(text: str) -> str:
        writes.append(text)
        return text

    child = await Child.spawn([sys.executable, "-c", code], {}, write)
    info = await child.wait()
    assert info.code == 0
    return writes, info.stderr_tail


async def test_a_trickle_is_read_in_few_gathers_and_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    reads = []
    data_received = Output.data_received

    def counted(self: Output, data: bytes) -> None:
        reads.append(len(data))
        data_received(self, data)

    monkeypatch.setattr(Output, "data_received", counted)
    writes, tail = await _run(TRICKLE)
    lines = "\n".join(writes).split("\n")
    assert lines == [str(i) for i in range(100)]
    # About one read per 50 ms over half a second (the loop woken as often), not one per line.
    assert len(reads) <= 40, reads
    assert len(writes) <= len(reads)  # a write per read at most: one redaction each
    assert tail[-1] == "99"


async def test_a_flood_past_the_pipe_size_is_read_whole() -> None:
    writes, tail = await _run(FLOOD)
    lines = "\n".join(writes).split("\n")
    assert len(lines) == 8192
    assert set(lines) == {"x" * 1023}
    assert len(tail) == 50


async def test_crlf_endings_are_dropped_and_a_carriage_return_inside_a_line_kept() -> None:
    code = "import sys\nsys.stdout.buffer.write(b'one\\r\\ntwo\\r\\r\\nthree\\rfour\\nfive\\n')"
    writes, tail = await _run(code)
    assert "\n".join(writes).split("\n") == ["one", "two", "three\rfour", "five"]
    assert tail == ["one", "two", "three\rfour", "five"]
