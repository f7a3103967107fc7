"""`llamactl models`, `pull` and `rm`: the daemon's model library, its downloads and
their removal."""

from __future__ import annotations

import json
import sys
from urllib.parse import quote

from llamad.cli.commands import client_for, err

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse
    from typing import Any, TextIO


def models(args: argparse.Namespace) -> int:
    """`llamactl models`: every model the library found, servable or with the reason not."""
    doc = client_for(args).call("GET", "/v1/library")
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    if not doc.get("enabled"):
        print("the library is off (no [gateway] listen, or [library] enabled = false)")
        return 0
    rows = [("NAME", "SOURCE", "SIZE", "QUANT", "LOADED")]
    for m in doc["models"]:
        loaded = "yes" if m["loaded"] else ("-" if m["problem"] else "no")
        rows.append(
            (m["name"], m["source"], size_text(m["size_bytes"]), m["quantization"] or "-", loaded)
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    from llamad.backends.builtin_template import worth_saying

    for m in doc["models"]:
        if m["problem"]:
            print(f"{m['name']}: not servable: {m['problem']}")
            continue
        if m.get("note"):
            print(f"{m['name']}: {m['note']}")
        if line := worth_saying(m.get("chat_template")):
            print(f"{m['name']}: chat template: {line}")
    for note in doc["notes"]:
        print(f"note: {note}")
    return 0


def pull(args: argparse.Namespace) -> int:
    """`llamactl pull REF`: download into the library, a progress bar on a TTY; 1 on error."""
    out = sys.stdout
    shown = _Shown(out, out.isatty())
    buf = b""
    with client_for(args).stream("/v1/library/pull", None, "POST", {"model": args.ref}) as chunks:
        for chunk in chunks:
            buf += chunk
            *lines, buf = buf.split(b"\n")
            for line in lines:
                if not line.strip():
                    continue
                event = json.loads(line)
                if "error" in event:
                    shown.end()
                    err(str(event["error"]))
                    return 1
                shown.show(event)
    shown.end()
    return 0


# llamad waits up to a minute for a model's requests in flight before deleting its files.
RM_TIMEOUT_S = 90.0


def rm(args: argparse.Namespace) -> int:
    """`llamactl rm NAME`: delete a model llamad pulled (unloaded first); 1 when refused."""
    path = f"/v1/library/{quote(args.name, safe='')}"
    doc = client_for(args, timeout=RM_TIMEOUT_S).call("DELETE", path)
    print(f"deleted {doc['model']} ({size_text(doc['freed_bytes'])} freed)")
    return 0


class _Shown:
    """Progress as a redrawn bar on a TTY; otherwise a line per status and per quarter."""

    def __init__(self, out: TextIO, tty: bool) -> None:
        self.out, self.tty = out, tty
        self.last_status = ""
        self.last_quarter = -1
        self.bar = False

    def show(self, event: dict[str, Any]) -> None:
        status, total = str(event.get("status", "")), event.get("total")
        if total:
            done = int(event.get("completed") or 0)
            pct = 100 * done // max(int(total), 1)
            if self.tty:
                filled = pct * 30 // 100
                bar = "#" * filled + "." * (30 - filled)
                self.out.write(f"\r{status} {bar} {pct:3d}% {size_text(done)}/{size_text(total)}")
                self.bar = True
            elif status != self.last_status or pct // 25 != self.last_quarter:
                self.out.write(f"{status}: {pct}% of {size_text(total)}\n")
            self.last_quarter = pct // 25
        elif status != self.last_status:
            self.end()
            self.out.write(status + "\n")
        self.last_status = status
        self.out.flush()

    def end(self) -> None:
        if self.bar:
            self.out.write("\n")
            self.bar = False


def size_text(n: Any) -> str:
    """A byte count as llamactl prints it: \"12.4 MB\"."""
    value = float(n or 0)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1000 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1000
    return f"{value:.1f} GB"
