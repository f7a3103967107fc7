"""Wall-clock timestamps as llamad writes them in status documents and events."""

from __future__ import annotations

import datetime as dt


def utcnow() -> str:
    """Wall-clock time as the status document writes it: ISO 8601, milliseconds, Z."""
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
