"""The bench's text tables: figures printed to the digits their unit needs, in columns."""

from __future__ import annotations

from collections.abc import Sequence

from bench.common import Result


def digits(value: float, unit: str) -> int:
    """Decimals to print a figure in `unit` with."""
    if unit == "ms":
        return 0 if abs(value) >= 10 else 1
    return {"MB": 1, "%": 3, "req": 0}.get(unit, 2)


def fmt(value: float | None, unit: str) -> str:
    """A figure as the tables print it ("-" for none)."""
    return "-" if value is None else f"{value:.{digits(value, unit)}f}"


def layout(rows: Sequence[tuple[str, ...]]) -> str:
    """Rows as fixed-width text, the first a head underlined with dashes."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(line.rstrip() for line in lines)


HEAD = ("measurement", "N", "median", "min", "max", "floor", "ratio/overhead", "target", "result")


def table(results: list[Result]) -> str:
    """The results as a fixed-width text table."""
    rows = [HEAD]
    for r in results:
        u = r.unit
        places = 3 if r.paired else 2
        rel = f"{r.ratio:.{places}f}x" if r.compare == "ratio" and r.ratio is not None else ""
        if r.compare == "overhead":
            rel = f"{r.overhead:+.{digits(r.overhead, u)}f} {u}"
        verdict = {True: "PASS", False: "MISS", None: "info"}[r.passed]
        rows.append(
            (
                r.name,
                str(r.n),
                f"{fmt(r.median, u)} {u}",
                fmt(min(r.samples), u),
                fmt(max(r.samples), u),
                f"{fmt(r.floor_median, u)} {u}",
                rel,
                r.target,
                verdict,
            )
        )
    return layout(rows)
