"""`llamactl cache`: the prompt caches llamad saved, per model, and `cache clear [MODEL]`."""

from __future__ import annotations

import json
from urllib.parse import quote

from llamad.cli.commands import client_for, err
from llamad.cli.library import size_text

# Importing typing slows llamactl's start; annotations are never evaluated at run time.
TYPE_CHECKING = False
if TYPE_CHECKING:
    import argparse


def cache(args: argparse.Namespace) -> int:
    """List the saved slots (model, slot, tokens, size, age), or clear them; 2 on bad words."""
    words = list(args.words)
    if words and words[0] == "clear" and len(words) <= 2:
        path = "/v1/cache" + (f"/{quote(words[1], safe='')}" if len(words) == 2 else "")
        doc = client_for(args).call("DELETE", path)
        print(f"removed {doc['removed']} saved slots ({size_text(doc['freed_bytes'])} freed)")
        return 0
    if words:
        err("usage: llamactl cache [clear [MODEL]]")
        return 2
    doc = client_for(args).call("GET", "/v1/cache")
    if args.json:
        print(json.dumps(doc, indent=2))
        return 0
    rows = [("MODEL", "SLOT", "TOKENS", "SIZE", "AGE")]
    for s in doc["saved"]:
        slot = "-" if s["slot"] is None else str(s["slot"])  # a conversation kept
        rows.append((s["model"], slot, str(s["tokens"]), size_text(s["bytes"]), _age(s["age_s"])))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    print(f"{size_text(doc['bytes'])} in {doc['dir']}")
    for note in doc.get("notes", []):
        state = "saved" if note["kept"] else "not saved"
        cost = note["full_window_bytes"]
        why = note["note"] or f"full-size window cache, {size_text(cost)} more memory"
        print(f"{note['model']}: {state}: {why}")
    for name, m in doc.get("models", {}).items():
        if not m["restores"] and m["stopped"] is None:
            continue
        p50, p95 = m["restore_ms_p50"], m["restore_ms_p95"]
        times = f", restore {p50:g}/{p95:g} ms p50/p95" if p50 is not None else ""
        disk = f", {size_text(m['bytes'])} on disk" if m.get("bytes") else ""
        line = (f"{name}: {m['restores']} restores, {m['hits']} reused, {m['misses']} not, "
                f"{m['tokens_saved']} tokens saved{times}{disk}")  # fmt: skip
        print(line + (f"; saves stopped: {m['stopped']}" if m["stopped"] else ""))
    return 0


def _age(seconds: float) -> str:
    for unit, scale in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= scale:
            return f"{int(seconds // scale)}{unit}"
    return f"{int(seconds)}s"
