"""Bearer tokens kept in files: read them only from files no one else can read.

Standard library only: llamactl reads peers' tokens on its way to `fleet status`, and
llamad reads its own when it loads the config. Both refuse a file that grants any
permission to group or others, as ssh does for a private key: a token that other local
users can read (or replace) is a token they hold.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

# Enough entropy that guessing is hopeless even without the rate limit.
MIN_TOKEN_CHARS = 16
# Owner-only, as `chmod 600` leaves it; any group/other bit is refused.
_OTHERS = stat.S_IRWXG | stat.S_IRWXO


class TokenFileError(ValueError):
    """A token file that cannot be used; the message is one line naming the file."""


def check_private(path: Path) -> None:
    """Raise TokenFileError unless `path` is a regular file with no group/other access."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise TokenFileError(f"cannot read {path}: {exc.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise TokenFileError(f"{path} is not a regular file")
    mode = stat.S_IMODE(st.st_mode)
    if mode & _OTHERS:
        raise TokenFileError(
            f"{path} is accessible by group or others (mode {mode:04o}); run: chmod 600 {path}"
        )


def read_token(path: Path, min_chars: int = 1) -> str:
    """The token in `path` (its first non-blank line, stripped), after check_private()."""
    path = Path(path).expanduser()
    check_private(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TokenFileError(f"cannot read {path}: {exc}") from None
    token = next((line.strip() for line in text.splitlines() if line.strip()), "")
    if not token:
        raise TokenFileError(f"{path} holds no token")
    if len(token) < min_chars:
        raise TokenFileError(
            f"the token in {path} is {len(token)} characters; use at least {min_chars} "
            "(e.g. `openssl rand -hex 32`)"
        )
    if any(c.isspace() or not c.isprintable() for c in token):
        # It travels in an HTTP header: a space or control character would break it.
        raise TokenFileError(f"the token in {path} contains spaces or control characters")
    return token
