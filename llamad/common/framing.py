"""What an HTTP/1.1 message may spend on anything but its body's data: its head, and a
chunked body's chunk sizes, extensions and trailers. The listeners' reader counts a
request's bytes against one `Framing`, and the upstream client an answer's
(`upstream/connection.py`): llhttp gathers a header line, or a trailer's, piece by piece
before it calls back, so an endless line is stopped by the bytes fed, not when it ends.
"""

from __future__ import annotations

# nginx's large_client_header_buffers, Node's --max-http-header-size and h11 sit near here.
MAX_HEAD = 64 * 1024
MAX_HEADERS = 100
# What a chunk's own framing may cost beyond the head's allowance: its size line (sixteen
# hex digits at most) and the CRLFs around its data.
CHUNK_FRAMING = 24


class Framing:
    """The bytes one message has spent outside its body's data, against its allowance."""

    __slots__ = ("_allow", "_counted", "_lines", "_raw", "max_bytes", "max_lines")

    def __init__(self, max_bytes: int = MAX_HEAD, max_lines: int | None = MAX_HEADERS) -> None:
        """`max_lines`: None for no count of lines (the bytes bound them)."""
        self.max_bytes, self.max_lines = max_bytes, max_lines
        self._raw = self._lines = self._counted = 0
        self._allow = max_bytes

    def begin(self, max_bytes: int | None = None, max_lines: int | None = None) -> None:
        """A new message, under these limits: its lines count from none. Its bytes count
        from the end of the last (`body_begins`), those of the read it began in too."""
        if max_bytes is not None:
            self.max_bytes = max_bytes
        if max_lines is not None:
            self.max_lines = max_lines
        self._lines = self._counted = 0
        self._allow = self.max_bytes

    def body_begins(self) -> None:
        """The head (or the whole message) is in: what follows gets an allowance anew."""
        self._raw, self._allow = 0, self.max_bytes

    def fed(self, size: int) -> None:
        """`size` bytes were handed to the parser."""
        self._raw += size

    def data(self, size: int) -> None:
        """The parser gave `size` bytes of body data: they are not framing."""
        self._raw -= size

    def chunk(self) -> None:
        """A chunk began: its size line is framing the allowance grows by."""
        self._allow += CHUNK_FRAMING

    def line(self, size: int) -> bool:
        """A header (or trailer) line of `size` bytes ended; False once the message's
        lines are past `max_lines` or their bytes past `max_bytes`."""
        self._lines += 1
        most = self.max_lines
        return (most is None or self._lines <= most) and self.counted(size)

    def counted(self, size: int) -> bool:
        """`size` bytes of the head the parser called back with (its target, say);
        False once past `max_bytes`. Exact where `over` sees whole reads."""
        self._counted += size
        return self._counted <= self.max_bytes

    @property
    def over(self) -> bool:
        """More bytes than allowed went on framing."""
        return self._raw > self._allow
