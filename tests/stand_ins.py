"""Stand-ins that tests drive llamad code against: recording executables put first on PATH
(launchctl, systemctl, llamad), and a thread that serves a stand-in controller.

A recording stand-in appends its argv to a log and answers with the exit code, stdout and
stderr of the longest matching rule, so a test can script a tool that cannot run here.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from llamad.cli.parser import build_parser

FAKE_TOOL = """#!{python}
import json, os, sys
argv = [os.path.basename(sys.argv[0]), *sys.argv[1:]]
with open(os.environ["FAKE_TOOL_LOG"], "a") as log:
    log.write(json.dumps(argv) + "\\n")
line = " ".join(argv)
rules = json.loads(os.environ.get("FAKE_TOOL_RULES", "{{}}"))
match = max((key for key in rules if line.startswith(key)), key=len, default=None)
rule = rules[match] if match is not None else {{}}
if "seq" in rule:  # the n-th call matching this rule gets the n-th answer (the last repeats)
    with open(os.environ["FAKE_TOOL_LOG"]) as log:
        seen = sum(1 for past in log if " ".join(json.loads(past)).startswith(match))
    rule = rule["seq"][min(seen, len(rule["seq"])) - 1]
sys.stdout.write(rule.get("stdout", ""))
sys.stderr.write(rule.get("stderr", ""))
sys.exit(rule.get("code", 0))
"""


class Fakes:
    """The recording stand-ins: set answers with `rule`, read what was run with `calls`."""

    def __init__(self, log: Path, monkeypatch: pytest.MonkeyPatch) -> None:
        self.log, self.monkeypatch = log, monkeypatch
        self.rules: dict[str, dict[str, Any]] = {}
        monkeypatch.setenv("FAKE_TOOL_LOG", str(log))

    def rule(self, prefix: str, code: int = 0, stdout: str = "", stderr: str = "") -> None:
        self.rules[prefix] = {"code": code, "stdout": stdout, "stderr": stderr}
        self.monkeypatch.setenv("FAKE_TOOL_RULES", json.dumps(self.rules))

    def answers(self, prefix: str, *codes: int, stderr: str = "") -> None:
        """Successive calls matching `prefix` exit with `codes` in turn (the last repeats)."""
        self.rules[prefix] = {"seq": [{"code": c, "stderr": stderr if c else ""} for c in codes]}
        self.monkeypatch.setenv("FAKE_TOOL_RULES", json.dumps(self.rules))

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [json.loads(line) for line in self.log.read_text().splitlines()]


def install_fakes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *names: str) -> Fakes:
    """Recording stand-ins for `names` in `tmp_path/bin`, first on PATH.

    sys.executable moves into that bin dir too: the service back ends look for llamad next
    to the running python, as in a virtualenv.
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in names:
        tool = bin_dir / name
        tool.write_text(FAKE_TOOL.format(python=sys.executable))
        tool.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(bin_dir / "python"))
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    return Fakes(tmp_path / "calls.jsonl", monkeypatch)


def service_llamactl(manager: str, *argv: str) -> int:
    """What `llamactl service ... --manager <manager>` does: parse, call func."""
    args = build_parser(service=True).parse_args(["service", *argv, "--manager", manager])
    result: int = args.func(args)
    return result


class ServerThread:
    """A control server on its own event loop in a thread, as llamactl meets a daemon.

    A subclass sets its own attributes, then calls `__init__`, which returns once `serve`
    has called `self.bound.set`.
    """

    def __init__(self, what: str) -> None:
        self.bound = threading.Event()
        self.loop: asyncio.AbstractEventLoop | None = None
        self.shutdown: asyncio.Event | None = None
        self.thread = threading.Thread(target=asyncio.run, args=(self._main(),))
        self.thread.start()
        assert self.bound.wait(5), f"{what} did not come up"

    async def _main(self) -> None:
        self.loop, self.shutdown = asyncio.get_running_loop(), asyncio.Event()
        await self.serve(self.shutdown)

    async def serve(self, shutdown: asyncio.Event) -> None:
        """Serve until `shutdown` is set."""
        raise NotImplementedError

    def stop(self) -> None:
        """Shut the server down and join its thread."""
        assert self.loop is not None
        assert self.shutdown is not None
        self.loop.call_soon_threadsafe(self.shutdown.set)
        self.thread.join(5)
        assert not self.thread.is_alive()


CAFFEINATE = """#!{python}
# macOS's caffeinate, standing in: records its start (argv) and its stop, holds nothing.
import os, signal, sys
record = {record!r}
def stop(*_):
    with open(record, "a") as out:
        out.write("stop %d\\n" % os.getpid())
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
with open(record, "a") as out:
    out.write("start %d %s\\n" % (os.getpid(), " ".join(sys.argv[1:])))
while True:
    signal.pause()
"""


def install_caffeinate(bin_dir: Path) -> Path:
    """A `caffeinate` stand-in in `bin_dir` (put it first on PATH); returns the file it
    records each start (`start PID ARGS`) and stop (`stop PID`) in."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    record = bin_dir / "caffeinate.log"
    record.touch()
    tool = bin_dir / "caffeinate"
    tool.write_text(CAFFEINATE.format(python=sys.executable, record=str(record)))
    tool.chmod(0o755)
    return record
