"""Tables of the shapes and many-threads sections, for the README and docs/benchmarks.md.

The shapes section makes a claim per shape, call and store (well over a
hundred): the README shows them as one grid per store, ratio and spread in
each cell; docs/benchmarks.md lists every claim too. Their rows render as
one table per shape, and the many-threads rows as one table per store with
a column per number of threads.
"""

from __future__ import annotations

from typing import Any

from benchmarks.tables.markdown import num, ratio, size, table

__all__ = ["SHAPE_TITLES", "shape_grid", "shape_rows", "thread_rows"]

# Short names of the shapes (sections.shapes), in run order.
SHAPE_TITLES = {
    "dict_grow": "dict messages, `operator.add`, growing",
    "dict_window": "last 24 dict messages (custom reducer)",
    "lc_trim": "`add_messages` trimmed to 24 (`RemoveMessage`)",
    "docs": "dict of 60 ~1 kB documents, one key per node",
    "plan": "30-item plan regenerated, 20 unchanged",
    "draft": "40 kB draft rewritten at its ends",
    "subgraph": "`add_messages`, the agent a subgraph",
    "lc_grow": "`add_messages` growing",
}
_STORES = {
    "memory": "SwarmStateSaver(Store) / InMemorySaver",
    "disk": "SwarmStateSaver(DiskStore NORMAL) / SqliteSaver NORMAL",
    "postgres": "SwarmStateSaver(PostgresStore) / PostgresSaver",
}
_SAVERS = (
    "SwarmStateSaver(Store)",
    "InMemorySaver",
    "SwarmStateSaver(DiskStore NORMAL)",
    "SqliteSaver NORMAL",
    "SwarmStateSaver(PostgresStore)",
    "PostgresSaver",
)
_CALLS = {
    "put": "put",
    "invoke": "invoke",
    "get_state": "get_state",
    "get_state_new": "get_state, new saver",
    "list10": "list(limit=10)",
    "bytes": "bytes",
}


def _time(us: float | None) -> str:
    """A duration given in µs, in the unit a reader takes in at a glance."""
    if us is None:
        return ""
    if us >= 1e6:
        return f"{us / 1e6:.3g} s"
    return f"{us / 1e3:.3g} ms" if us >= 1e3 else f"{num(float(us))} µs"


def _cell(claim: dict[str, Any] | None) -> str:
    if claim is None:
        return ""
    if claim.get("ratio") is None:
        return "not measured"
    spread = "" if claim["q1"] == claim["q3"] else f" ({ratio(claim['q1'])}-{ratio(claim['q3'])})"
    text = f"{ratio(claim['ratio'])}{spread}"
    return text if claim.get("holds") else f"**{text}**"


def shape_grid(claims: list[dict[str, Any]]) -> list[str]:
    """The shapes section's claims as one grid per store: ratio (spread), bold where missed."""
    mine = {c["id"]: c for c in claims if c.get("section") == "shapes"}
    if not mine:
        return []
    named = {cid.split(".")[1] for cid in mine}
    shapes = [s for s in SHAPE_TITLES if s in named] + sorted(named - set(SHAPE_TITLES))
    out: list[str] = []
    for store, pair in _STORES.items():
        calls = [
            call for call in _CALLS
            if any(f"shapes.{shape}.{call}.{store}" in mine for shape in shapes)
        ]  # fmt: skip
        lines = [
            [SHAPE_TITLES.get(shape, shape),
             *(_cell(mine.get(f"shapes.{shape}.{call}.{store}")) for call in calls)]
            for shape in shapes
        ]  # fmt: skip
        if not calls:
            continue
        put = mine.get(f"shapes.{shapes[0]}.put.{store}", {"bound": 1.0})["bound"]
        out += [
            f"*{pair}*: ratio of p50s (spread), **bold** where the claim misses. Limits: put "
            f"{put:g}, invoke, get_state and list 1, get_state by a new saver 1.1, each with its "
            "spread within 5%; bytes 0.05 for growing lists, 0.25 for windows, 0.15 for the "
            "documents, 0.5 for the plan, 1 for the draft.",
            "",
            *table(["shape", *(_CALLS[c] for c in calls)], lines),
            "",
        ]
    return out[:-1]


def shape_rows(rows: dict[str, dict[str, Any]]) -> tuple[list[str], set[str]]:
    """One table per shape: each saver's stored bytes and p50 per call."""
    mine = {rid: r for rid, r in rows.items() if r.get("section") == "shapes"}
    if not mine:
        return [], set()
    out: list[str] = []
    calls = ("put", "invoke", "get_state", "get_state_new", "list10")
    present = {r["shape"] for r in mine.values()}
    for shape in [s for s in SHAPE_TITLES if s in present] + sorted(present - set(SHAPE_TITLES)):
        present = {r["subject"] for r in mine.values() if r["shape"] == shape}
        savers = [s for s in _SAVERS if s in present] + sorted(present - set(_SAVERS))
        lines = []
        for saver in savers:
            got = {r["group"]: (rid, r) for rid, r in mine.items()
                   if r["shape"] == shape and r["subject"] == saver}  # fmt: skip
            stored = got.get("bytes", (None, {}))[1]
            cells = [_time(got[c][1].get("p50")) if c in got else "" for c in calls]
            lines.append([saver, size(stored.get("p50")), *cells,
                          str(stored.get("state_equal", ""))])  # fmt: skip
        turns = int(next(r["param"] for r in mine.values() if r["shape"] == shape))
        out += [
            "",
            f"### shapes: {SHAPE_TITLES.get(shape, shape)}, {num(turns)} turns",
            "",
            f"Rows `shapes.{shape}.<call>.<saver>`; put and invoke over the second half of the "
            "turns; state equal: the final state read back equals InMemorySaver's.",
            "",
            *table(["saver", "stored", "put p50", "invoke p50", "get_state p50",
                    "get_state p50, new saver", "list(limit=10) p50", "state equal"], lines),
        ]  # fmt: skip
    return out, set(mine)


_THREAD_OPS = (
    ("write", "writing the threads (s)", "p50"),
    ("first_put", "a new thread's put, p50", "p50"),
    ("delete_thread", "delete_thread, p50", "p50"),
    ("list10", "list(None, limit=10), p50", "p50"),
    ("retain", "retain(older_than=1 day), nothing expired, p50", "p50"),
    ("put_policy_off", "put, no policy: p50", "p50"),
    ("put_policy_on", "put, Retention(older_than=1 day): p50", "p50"),
    ("put_policy_off", "put, no policy: mean", "mean"),
    ("put_policy_on", "put, Retention(older_than=1 day): mean", "mean"),
    ("put_policy_on", "put, Retention(older_than=1 day): longest", "max"),
    ("cli", "`swarmstate threads --limit 20`, p50", "p50"),
    ("bytes", "stored", "p50"),
)


def _thread_cell(row: dict[str, Any] | None, metric: str) -> str:
    if row is None:
        return "left out"
    value = row.get(metric)
    if row.get("unit") == "bytes":
        return size(value)
    if row.get("unit") == "s":
        return f"{num(value)} s"
    return _time(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def thread_rows(rows: dict[str, dict[str, Any]]) -> tuple[list[str], set[str]]:
    """One table per store: every operation and saver, a column per number of threads."""
    mine = {rid: r for rid, r in rows.items() if r.get("section") == "threads"}
    if not mine:
        return [], set()
    out: list[str] = []
    for store in dict.fromkeys(r["store"] for r in mine.values()):
        here = {rid: r for rid, r in mine.items() if r["store"] == store}
        # A quick run pools its processes' rows: a size may come back as 1000.0.
        sizes = sorted({int(r["param"]) for r in here.values() if _is_number(r.get("param"))})
        lines = []
        for group, what, metric in _THREAD_OPS:
            present = {r["subject"] for r in here.values() if r["group"] == group}
            # Ours first, then the peer.
            for saver in sorted(present, key=lambda s: (not s.startswith("SwarmState"), s)):
                if saver == "budget":
                    continue
                cells = []
                for n in sizes:
                    row = here.get(f"threads.{store}.{group}.{saver}.{n}")
                    cells.append(_thread_cell(row, metric))
                lines.append([what, saver, *cells])
        out += [
            "",
            f"### threads: {'DiskStore' if store == 'disk' else 'PostgresStore'} and its peer",
            "",
            f"Rows `threads.{store}.<op>.<saver>.<threads>`; *left out*: over the time budget "
            "per call, or not run (the environment block says why).",
            "",
            *table(["op", "saver", *(f"{n:,} threads" for n in sizes)], lines),
        ]
    return out, set(mine)
