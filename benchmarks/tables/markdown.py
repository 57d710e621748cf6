"""Markdown formatting shared by the report's blocks: numbers, tables, claims, figures."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.harness.config import FLOOR_MARGIN

LATENCY = ("p50", "p90", "p99", "mean", "min", "max")

# Titles of the sections' claim tables; a section not listed here is shown by its name.
SECTION_TITLES = {
    "core": "Store, in memory",
    "disk": "DiskStore",
    "saver": "Checkpointer, in memory and durable on a file",
    "postgres": "Checkpointer on PostgreSQL",
    "postgres_dict": "Checkpointer on PostgreSQL, the plain-dict stream",
    "growth": "A growing LangGraph conversation",
    "workers": "Several workers: the cost of tombstones and fencing",
    "retention": "Retention: expiring threads, keeping the newest, giving space back",
    "shapes": "State shapes: each against the saver it replaces (issue #28)",
    "threads": "Many threads in one store: thread-level calls as threads pile up (issue #31)",
    "server": "A server: users awaiting one event loop, beside the upstream async savers "
    "(issue #39)",
}

CLAIM_NOTE = (
    "*ratio* is the median over interleaved rounds of the per-round ratio (numerator's "
    "p50, or ops/s, over the denominator's in the same round); *spread* is the "
    "interquartile range of those per-round ratios. A claim *holds* only if its whole "
    "spread is within the limit (upper quartile for `<=`, lower for `>=`); a limit that "
    "names a spread limit too (`<= 1 (spread <= 1.05)`) holds its median to the first and "
    "its quartile to the second. *floor*: "
    "where measured, the least any implementation does for that call (LangGraph's "
    "serializer alone, or the same write done bare), as the same ratio. A per-call "
    "limit below its floor is out of reach for every store: it reads *below floor*, "
    f"and the line after it (↳) restates it as within {FLOOR_MARGIN:g}x of the floor. "
    "A claim whose two rows were timed apart reads *not paired*: its ratio is shown, "
    "and it neither holds nor misses."
)


def num(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        if value >= 1000:
            return f"{value:,.0f}"
        if value >= 100:
            return f"{value:.0f}"
        if value >= 10:
            return f"{value:.1f}"
        return f"{value:.2f}"
    return f"{value:,}" if isinstance(value, int) else str(value)


def table(header: list[str], lines: list[list[str]]) -> list[str]:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(line) + " |" for line in lines]
    return out


def ratio(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:,.0f}" if value >= 1000 else f"{value:.3g}"


def times(value: float | None) -> str:
    if value is None:
        return "not measured"
    if value >= 100:
        return f"{value:,.0f}x"
    return f"{value:.2f}x" if value >= 0.1 else f"{value:.3g}x"


def fmt(value: float | None, metric: str) -> str:
    if value is None:
        return "not measured"
    if metric in LATENCY:
        return f"{num(value)} µs" if value < 1000 else f"{value / 1000:.3g} ms"
    if metric in ("median", "best"):
        return f"{value:,.0f} ops/s"
    return num(value)


def verdict(claim: dict[str, Any], after: bool = True) -> str:
    """What a claim's row says in its verdict column (``after``: its restatement follows it)."""
    if claim.get("verdict") == "below floor":
        if not claim.get("restated_as"):
            return "below floor"
        return "below floor: restated ↓" if after else "below floor: restated ↑ (same floor)"
    if claim.get("verdict") == "not paired":
        return "not paired: rows timed apart"
    if claim.get("verdict") == "not measured" or claim.get("ratio") is None:
        return f"not measured: {claim.get('note', 'no rows')}"
    return "holds" if claim.get("holds") else "**missed**"


def spread(claim: dict[str, Any]) -> str:
    if claim.get("q1") is None:
        return ""
    return f"{ratio(claim['q1'])}-{ratio(claim['q3'])}"


def limit(claim: dict[str, Any]) -> str:
    """A claim's limit, and its spread's where that one is set apart."""
    text = f"{claim['op']} {claim['bound']:g}"
    if claim.get("spread_bound") is not None:
        text += f" (spread {claim['op']} {claim['spread_bound']:g})"
    return text


def floor(claim: dict[str, Any]) -> str:
    if claim.get("floor_ratio") is None:
        return ""
    return f"{ratio(claim['floor_ratio'])} ({ratio(claim['floor_q1'])}-{ratio(claim['floor_q3'])})"


def claim_tables(claims: list[dict[str, Any]], *, rows: bool) -> list[str]:
    """One table per section, in the order sections first appear; any section renders."""
    sections: dict[str, list[dict[str, Any]]] = {}
    for claim in claims:
        sections.setdefault(claim.get("section") or "other", []).append(claim)
    out: list[str] = []
    header = ["claim", "ratio", "spread", "limit", "floor", "verdict"]
    for section, members in sections.items():
        lines = []
        seen: set[str] = set()
        for claim in members:
            seen.add(claim["id"])
            label = ("↳ " if claim.get("restates") else "") + str(claim["label"])
            line = [
                label,
                ratio(claim.get("ratio")),
                spread(claim),
                limit(claim),
                floor(claim),
                verdict(claim, after=claim.get("restated_as") not in seen),
            ]
            if rows:
                den = " / ".join(f"`{part}`" for part in claim["denominator"].split(" / "))
                line.append(f"`{claim['numerator']}` / {den}")
            lines.append(line)
        out += [f"**{SECTION_TITLES.get(section, section)}**", ""]
        out += table(header + (["rows"] if rows else []), lines)
        out.append("")
    return out[:-1] if out else ["No claims in this run."]


# --- Figures quoted by the docs ----------------------------------------------


@dataclass(frozen=True)
class Fig:
    """One figure: ``metric`` of row ``row``."""

    what: str
    row: str
    metric: str = "p50"


@dataclass(frozen=True)
class Ratio:
    """``metric`` of row ``num`` divided by the same metric of row ``den``."""

    what: str
    num: str
    den: str
    metric: str = "p50"


def metric(doc: dict[str, Any], row: str, name: str) -> float | None:
    value = doc["rows"].get(row, {}).get(name)
    return float(value) if isinstance(value, (int, float)) else None


def ratio_of(doc: dict[str, Any], a: str, b: str, name: str) -> float | None:
    x, y = metric(doc, a, name), metric(doc, b, name)
    return x / y if x is not None and y else None


def _stat(name: str) -> str:
    return "ops/s, median round" if name == "median" else name


def size(value: float | None) -> str:
    """Bytes as a reader reads them: ``3.21 MB``, ``412 kB``, ``980 B``."""
    if value is None:
        return "not measured"
    if abs(value) >= 1e6:
        return f"{value / 1e6:,.3g} MB" if abs(value) < 1e9 else f"{value / 1e9:,.3g} GB"
    return f"{value / 1e3:.3g} kB" if abs(value) >= 1e3 else f"{value:.0f} B"


def unit(doc: dict[str, Any], row: str) -> str:
    return str(doc["rows"].get(row, {}).get("unit", ""))


def figures(doc: dict[str, Any], items: list[Fig | Ratio]) -> list[str]:
    lines = []
    for item in items:
        if isinstance(item, Fig):
            value = fmt(metric(doc, item.row, item.metric), item.metric)
            stat = _stat(item.metric)
            if item.metric == "p50":  # a row may say what its one figure is
                stat = str(doc["rows"].get(item.row, {}).get("statistic", stat))
            if unit(doc, item.row) == "bytes":
                value = size(metric(doc, item.row, item.metric))
            lines.append([item.what, value, stat, f"`{item.row}`"])
        else:
            value = times(ratio_of(doc, item.num, item.den, item.metric))
            stat = f"ratio of {_stat(item.metric)}"
            if unit(doc, item.num) == "bytes":
                stat = "ratio"
            lines.append([item.what, value, stat, f"`{item.num}` / `{item.den}`"])
    return table(["what", "value", "statistic", "row"], lines)


def pairs(
    doc: dict[str, Any], heads: tuple[str, str], items: list[tuple[str, str, str]]
) -> list[str]:
    """A grid of p50s: each line is one operation at two settings, and their ratio."""
    lines = [
        [
            what,
            fmt(metric(doc, a, "p50"), "p50"),
            fmt(metric(doc, b, "p50"), "p50"),
            times(ratio_of(doc, b, a, "p50")),
            f"`{a}`, `{b}`",
        ]
        for what, a, b in items
    ]
    return table(["p50 of", heads[0], heads[1], "ratio", "rows"], lines)
