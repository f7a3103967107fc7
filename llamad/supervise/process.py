"""One llama-server child: launch it in its own process group, pump its output, reap it."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import ctypes
import errno
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from llamad.common.clock import utcnow
from llamad.supervise.output import Output, pipe
from llamad.supervise.port_owner import port_owner

TAIL_LINES = 50


@dataclass(frozen=True)
class ExitInfo:
    """How a child ended, as the status document shows it."""

    code: int | None
    signal: str | None
    at: str
    stderr_tail: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """A short human reason, e.g. 'killed by SIGKILL' or 'exited with code 1: <last line>'."""
        what = f"killed by {self.signal}" if self.signal else f"exited with code {self.code}"
        line = telling_line(self.stderr_tail)
        return f"{what}: {line.strip()[:200]}" if line and self.code else what

    def to_dict(self) -> dict[str, object]:
        """The `last_exit` object of the status document."""
        return {
            "code": self.code,
            "signal": self.signal,
            "at": self.at,
            "stderr_tail": self.stderr_tail,
        }


_TELLING = ("error", "failed to open", "failed to load", "cannot", "no such file")


def telling_line(tail: list[str]) -> str:
    """The line that says why a process died: the first error in its last output, else
    its last line (llama-server ends with 'cleaning up before exit...', which says nothing)."""
    for line in tail:
        if any(word in line.lower() for word in _TELLING):
            return line
    return next((ln for ln in reversed(tail) if ln.strip()), "")


def _resolve_prctl() -> Callable[[int, int], int] | None:
    # Resolved here, in the parent at import: a dlopen in the forked child of a threaded
    # daemon can deadlock on a loader lock another thread held at fork time.
    if sys.platform != "linux":
        return None
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes, prctl.restype = [ctypes.c_int, ctypes.c_ulong], ctypes.c_int
    return prctl


_PRCTL = _resolve_prctl()
_PR_SET_PDEATHSIG = 1
_SIGKILL = int(signal.SIGKILL)


def die_with_parent(daemon_pid: int) -> Callable[[], None]:
    """The child's preexec step: die with the daemon, and at once if it is already gone."""

    def preexec() -> None:
        # Runs between fork and exec: only the pointer resolved above, no loader code.
        # The kernel then SIGKILLs the child when llamad dies, even by SIGKILL; a daemon
        # that died between fork and prctl sent no signal, so check it is still there.
        if _PRCTL is not None:
            _PRCTL(_PR_SET_PDEATHSIG, _SIGKILL)
        if os.getppid() != daemon_pid:
            os._exit(1)

    return preexec


class Child:
    """A running llama-server (or rpc worker) process and its output pump."""

    def __init__(self, proc: asyncio.subprocess.Process, write: Callable[[str], str]) -> None:
        self.proc = proc
        self.pid = proc.pid
        self.tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
        self.started = asyncio.get_running_loop().time()
        self.started_at = time.time()  # wall clock, for the start-time metric
        self._write = write
        self.output = Output(self._lines)

    @classmethod
    async def spawn(
        cls,
        argv: list[str],
        env: dict[str, str],
        write: Callable[[str], str],
    ) -> Child:
        """Launch `argv` in a new session so signals reach its whole process group.
        `write(text)` keeps its output and returns it as kept (redacted) for the tail."""
        read_fd, write_fd = pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv,
                env=env,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=write_fd,
                stderr=write_fd,
                start_new_session=True,
                preexec_fn=die_with_parent(os.getpid()) if _PRCTL is not None else None,
            )
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)  # the child's copy is the only writer: EOF comes with its exit
        child = cls(proc, write)
        reading = os.fdopen(read_fd, "rb", buffering=0)  # the transport closes it
        await asyncio.get_running_loop().connect_read_pipe(lambda: child.output, reading)
        return child

    def _lines(self, raw: list[bytes]) -> None:
        # One redaction and one write per read, however many lines it brought: llama-server
        # logs several lines per request, and this runs on the loop the gateway relays on.
        # The tail reaches the status document (and the read-only token over TCP): it keeps
        # what the writer wrote, redacted once, by the writer.
        joined = b"\n".join(raw)
        if b"\r" in joined:  # CRLF endings (rare): each line's own are dropped
            joined = b"\n".join(line.rstrip(b"\r") for line in raw)
        text = joined.decode("utf-8", "replace")
        self.tail.extend(self._write(text).split("\n"))

    def signal(self, name: str) -> None:
        """Signal the child's process group; a child already gone is fine."""
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pid, getattr(signal, f"SIG{name}"))

    async def wait(self) -> ExitInfo:
        """Wait for the exit (reaped by asyncio, so no zombie) and the last of its output."""
        code = await self.proc.wait()
        await self.output.drain(0.5)  # output still in the pipe belongs to the tail
        if code < 0:
            return ExitInfo(None, signal.Signals(-code).name, utcnow(), list(self.tail))
        return ExitInfo(code, None, utcnow(), list(self.tail))


def bind_error(host: str, port: int) -> OSError | None:
    """What binding `port` on `host` fails with right now, or None when it is free."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as sock:
        # As llama-server does: without it, TIME_WAIT left by our own probes reads as taken.
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError as exc:
            return exc
    return None


async def port_problem(
    host: str, port: int, owner: Callable[[int], str] = port_owner
) -> str | None:
    """Why `port` can't be bound on `host` right now, naming the holder when it can."""
    exc = bind_error(host, port)
    if exc is None:
        return None
    if exc.errno == errno.EADDRINUSE:
        # lsof, or a scan of every socket on the host: tens of ms or more, in a thread so
        # the requests the gateway relays meanwhile do not wait for it.
        return f"port {port} in use by {await asyncio.to_thread(owner, port)}"
    if exc.errno == errno.EADDRNOTAVAIL:
        return f"cannot bind {host}:{port}: address not available on this host"
    return f"cannot bind {host}:{port}: {exc.strerror}"
