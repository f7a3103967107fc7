"""A stand-in for llama.cpp's one `llama` binary (build 11146 on), around the real server.

The seed `000_e595988e66422bc5.txt` probed the macOS release b11146: `./llama --help` lists
the commands `serve cli download version licenses help`, `llama serve --help` prints
exactly llama-server's `--help`, and a server was started as `llama serve -m ... --port`.
The stand-in runs the real llama-server (the test extra's) for `serve ARGS...`, so
`serve --help` and `serve --version` are the real ones; only the shell's builtins run
otherwise, so it works with a PATH that holds nothing else.
"""

from __future__ import annotations

import os
from pathlib import Path

# `--version` of the seed's build (its llama-server's); what the stand-in's `version` says.
SEED_VERSION = "version: 0.5.0-dev (build 11146, commit 7fe450e19)"
COMMANDS = ("serve", "cli", "download", "version", "licenses", "help")
# The release's exact layout of `llama --help` is not in the seed: its commands, one a line.
HELP = "usage: llama <command> [options]\\n\\ncommands:\\n" + "".join(
    f"  {command}\\n" for command in COMMANDS
)


def stand_in_llama(path: Path, real: Path) -> Path:
    """Write the stand-in `llama` at `path` (atomically, as an install does); `real` is the
    llama-server that `llama serve` runs."""
    tmp = path.with_name(path.name + ".new")
    tmp.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f'  serve) shift; exec "{real}" "$@";;\n'
        f'  version) echo "{SEED_VERSION}";;\n'
        f"  --help|-h|help|'') printf '{HELP}';;\n"
        "  *) echo \"llama: unknown command '$1'\" >&2; exit 1;;\n"
        "esac\n"
    )
    tmp.chmod(0o755)
    os.replace(tmp, path)
    return path
