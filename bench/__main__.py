"""`python -m bench`: run the benchmarks, print a table and write bench/results.json.

Every figure is set against a floor measured in the same run. Exit status: 2 when a
benchmark failed to run or left a process behind; with --strict, 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from bench import (
    base_build,
    baseline,
    cache_route,
    cold_start,
    fleet,
    fleet_polls,
    footprint,
    gateway,
    hostile,
    hybrid,
    machinery,
    peers,
    realmodel,
    recovery,
    reload,
    returning,
    rollout,
    status,
    stress,
)
from bench.common import Context, Result
from bench.machine import BUSY_WARNING, Background, machine_info
from bench.procs import leftover_children
from bench.tables import table
from llamad.backends.binaries import find_binary
from llamad.backends.catalog_cache import load_catalog
from llamad.backends.tool import ServerCommand
from llamad.daemon.tinymodel import write_tiny_model

BENCHMARKS: dict[str, Callable[[Context], list[Result]]] = {
    "cold_start": cold_start.run,
    "crash": recovery.run_crash,
    "hang": recovery.run_hang,
    "reload": reload.run,
    "footprint": footprint.run,
    "status": status.run,
    "gateway": gateway.run,
    "machinery": machinery.run,
    "stress": stress.run,
    "peers": peers.run,
    "fleet": fleet.run,
    "cache_route": cache_route.run,
    "fleet_polls": fleet_polls.run,
    "realmodel": realmodel.run,
    "returning": returning.run,
    "hybrid": hybrid.run,
    "hostile": hostile.run,
    "rollout": rollout.run,
}
RESULTS = Path(__file__).with_name("results.json")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--quick", action="store_true", help="fewer repeats, shorter idle windows")
    p.add_argument(
        "--only",
        action="append",
        choices=sorted(BENCHMARKS),
        metavar="NAME",
        help=f"run only this benchmark (repeatable): {', '.join(BENCHMARKS)}",
    )
    p.add_argument("--strict", action="store_true", help="exit 1 when a target is missed")
    p.add_argument(
        "--soak-requests",
        type=int,
        metavar="N",
        help="requests through each proxy in the peers' memory soak (default 100000, llamad's "
        "all of them and a peer's up to 60 s; quick 2000)",
    )
    p.add_argument(
        "--baseline",
        metavar="REF",
        help="measure this commit's llamad beside the checkout's, in the same rounds (its "
        "virtualenv is built once, .venv-bench-base-<sha>)",
    )
    p.add_argument("--output", type=Path, default=RESULTS, help="where to write the JSON")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        base = base_build.prepare(args.baseline) if args.baseline else None
    except base_build.BaselineError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    wall0 = time.perf_counter()
    root = Path(tempfile.mkdtemp(prefix="llamad-bench-"))
    short = Path(tempfile.mkdtemp(prefix="lb-", dir="/tmp"))
    # The bench resolves configs itself (for the floors): keep its cache in the run too.
    os.environ["XDG_CACHE_HOME"] = str(root / "cache")
    os.environ["XDG_STATE_HOME"] = str(root / "state")
    info: dict[str, Any] = {}
    results: list[Result] = []
    errors: list[str] = []
    background: dict[str, float] = {}
    ctx: Context | None = None
    try:
        binary = find_binary(None)
        version = load_catalog(
            ServerCommand(binary), root / "cache" / "llamad"
        ).version  # warm the cache
        model = write_tiny_model(root / "tiny.gguf")
        ctx = Context(root=root, short=short, model=model, binary=binary, quick=args.quick,
                      soak=args.soak_requests, baseline=base)  # fmt: skip
        info = machine_info(binary, version)
        commit = (info["llamad_commit"] or "unknown")[:7]
        dirty = f" + {len(info['llamad_changed'])} changed files" if info["llamad_changed"] else ""
        print(f"# {info['cpu']}, {info['cores']} cores, Python {info['python']}, {version}")
        print(f"# llamad at {commit}{dirty}")
        if base:
            print(f"# beside {base.label} ({args.baseline}), run by {base.python}")
        for name in args.only or list(BENCHMARKS):
            t0, others = time.perf_counter(), Background()
            try:
                got = BENCHMARKS[name](ctx)
            except Exception:
                errors.append(f"{name}: {traceback.format_exc()}")
                print(f"# {name}: FAILED\n{traceback.format_exc()}", file=sys.stderr)
                continue
            busy = background[name] = round(others.stop(), 1)
            for r in got:
                r.extra["background_cpu_percent"] = busy
            results += got
            warn = "  <- busy machine, figures suspect" if busy > BUSY_WARNING else ""
            took = time.perf_counter() - t0
            print(f"# {name}: {took:.1f} s, other processes used {busy:.1f} % of the CPU{warn}")
    finally:
        left = leftover_children()
        shutil.rmtree(root, ignore_errors=True)
        shutil.rmtree(short, ignore_errors=True)
    if left:
        errors.append(f"child processes left behind (killed): {[p.pid for p in left]}")
    wall = time.perf_counter() - wall0
    print(table(results))
    for r in results:
        if r.note:
            print(f"  {r.name} N={r.n}: {r.note}")
    for key, text in (ctx.notes if ctx else {}).items():
        print(f"  {key}: {text}")
    if base:
        print(f"\nllamad beside {base.label}, same run:")
        print(baseline.side_by_side(results, base.label))
    print(f"whole run: {wall:.1f} s{' (--quick)' if args.quick else ''}")
    doc = {
        "machine": info,
        "quick": args.quick,
        "baseline": {"ref": args.baseline, "commit": base.commit, "label": base.label}
        if base
        else None,
        "wall_s": round(wall, 1),
        "background_cpu_percent": background,
        "results": [r.to_dict() for r in results],
        "notes": ctx.notes if ctx else {},
        "errors": errors,
        "leftover_children": [p.pid for p in left],
    }
    tmp = args.output.with_name(args.output.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    tmp.replace(args.output)
    for e in errors:
        print(f"ERROR: {e}", file=sys.stderr)
    if errors:
        return 2
    return 1 if args.strict and any(r.passed is False for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
