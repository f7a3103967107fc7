"""An installed executable a backend runs: which file, which command of it, which build.

Since build 11146 llama.cpp ships one `llama` binary whose `serve` command takes exactly
llama-server's options, so "which server" is a file and the words that come before the
options: `llama-server`, or `llama serve`.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ServerCommand:
    """An executable and its command words: `/usr/local/bin/llama serve`, or a bare
    `/opt/homebrew/bin/llama-server` (no words)."""

    path: Path
    prefix: tuple[str, ...] = ()

    def argv(self, *args: str) -> list[str]:
        """The command line that runs it with `args` (options, `--help`, `--version`)."""
        return [str(self.path), *self.prefix, *args]

    def __str__(self) -> str:
        """As a shell would take it; what status, events and errors name."""
        return shlex.join([str(self.path), *self.prefix])


@dataclass(frozen=True)
class Tool:
    """An installed executable a backend runs: what runs and which build it is.

    `details` is the backend's own reading of it (llama-server's option catalogue,
    ggml-rpc-server's help text), kept so a reload doesn't run `--help` again.
    """

    kind: str
    command: ServerCommand
    version: str
    details: Any = field(default=None, compare=False, repr=False)

    @property
    def path(self) -> Path:
        """The executable file (what is watched for upgrades)."""
        return self.command.path

    def to_dict(self) -> dict[str, str]:
        """`daemon.backends.KIND` in the status document."""
        return {"path": str(self.path), "command": str(self.command), "version": self.version}
