"""`python -m bench --baseline REF`: the old commit's llamad beside this one, in the same run.

Each benchmark that measures it takes both builds (`builds`) in the rounds it already
takes its targets in, so a busy spell of the machine weighs on old and new alike. An old
build's rows are twins of the new ones, named with its label (`llamad@c6a89fd`), marked
with the build and the row they stand beside, and never judged; `side_by_side` prints
each pair on the figure the new row is judged on.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

from bench.base_build import CURRENT, Build
from bench.common import Context, Result, http_get, wait_for
from bench.procs import Daemon
from bench.tables import digits, layout
from bench.targets import Target

T = TypeVar("T")


def builds(ctx: Context) -> list[Build]:
    """This checkout's llamad, then the baseline's if the run has one."""
    return [CURRENT, *([ctx.baseline] if ctx.baseline else [])]


def turned(items: list[T], i: int) -> list[T]:
    """`items` turned by `i`: round i's order, so no item always follows the same one."""
    k = i % len(items)
    return items[k:] + items[:k]


def mark(row: Result, label: str, beside: str) -> Result:
    """Mark `row` as `label`'s, standing beside the row named `beside`."""
    row.extra |= {"build": label, "beside": beside}
    return row


def twin(row: Result, build: Build) -> Result:
    """`row` as measured on `build`: this checkout's as it is; another's renamed with its
    label, for information only."""
    if build == CURRENT:
        return row
    other = dataclasses.replace(row, name=f"{row.name} {build.label}", check_on="none",
                                limit=None, target="-", extra=dict(row.extra))  # fmt: skip
    return mark(other, build.label, row.name)


def mark_peer_rows(ctx: Context, rows: list[Result]) -> list[Result]:
    """The rows a baseline target got (its label is in their names), marked as its."""
    if ctx.baseline is None:
        return rows
    label = ctx.baseline.label
    for row in rows:
        if label in row.name.split():
            mark(row, label, row.name.replace(label, "llamad"))
    return rows


def peer_targets(ctx: Context, instances: dict[str, dict[str, object]]) -> list[Target]:
    """The baseline's llamad in front of llama-servers of its own (the always-on ones of
    `instances`, on other ports), with direct requests to those as its floor; none
    without a baseline."""
    build = ctx.baseline
    if build is None:
        return []
    own = {m: {**k, "port": ctx.port()} for m, k in instances.items() if not k.get("on_demand")}
    port = ctx.port()
    daemon = Daemon(ctx, "peers-base", own, gateway={"listen": f"127.0.0.1:{port}"}, build=build)
    try:
        daemon.wait_socket()  # an old daemon that cannot start says so at once
        daemon.wait_running(list(own), timeout=60.0)
        wait_for(lambda: (http_get(port) or (0,))[0] == 200, 30.0, f"{build.label} gateway")
    except BaseException:
        daemon.stop()
        raise
    base = f"http://127.0.0.1:{port}"
    floor = Target(
        f"direct@{build.tag}", {m: f"http://127.0.0.1:{k['port']}" for m, k in own.items()}
    )
    return [
        Target(build.label, {m: base for m in own}, {m: [daemon.proc.pid] for m in own},
               version=build.commit[:12], on_stop=[daemon.stop], floor=floor)
    ]  # fmt: skip


def _figure(row: Result, new: Result) -> str:
    """`row`'s figure on what `new` is judged on (its check, else its column)."""
    on = new.check_on if new.check_on != "none" else new.compare
    value = row.value(on)
    if value is None:
        return "-"
    text = f"{value:.3f}x" if on == "ratio" else f"{value:.{digits(value, row.unit)}f} {row.unit}"
    if on == "overhead":
        text = "+" * (value >= 0) + text
    errors = row.extra.get("figures", {}).get("errors")
    return text if errors is None else f"{text}, {errors} errors"


def side_by_side(results: list[Result], label: str) -> str:
    """Each row of `label`'s beside the row it twins, on the figure that one is judged on."""
    new = {(r.name, r.n): r for r in results if "build" not in r.extra}
    rows = [("measurement", "N", "llamad", label, "judged on")]
    for old in results:
        mine = new.get((old.extra.get("beside", ""), old.n))
        if old.extra.get("build") != label or mine is None:
            continue
        on = mine.check_on if mine.check_on != "none" else f"{mine.compare} (info)"
        rows.append((mine.name, str(mine.n), _figure(mine, mine), _figure(old, mine), on))
    return layout(rows)
