"""Write every benchmark figure the docs and README quote, from one results file.

    python -m benchmarks.report [benchmarks/results.json] [--doc docs/benchmarks.md]
        [--readme README.md] [--docs-dir docs] [--check]

Only generated blocks are replaced: ``<!-- results:begin -->`` ...
``<!-- results:end -->`` in docs/benchmarks.md (every claim and row),
``<!-- numbers:start -->`` ... ``<!-- numbers:end -->`` in the README (the
claims), and the named blocks ``<!-- results:NAME:begin -->`` ...
``<!-- results:NAME:end -->`` listed in ``tables.blocks.BLOCKS`` (figures quoted by
performance.md, disk.md, postgres.md, langgraph.md and architecture.md,
each next to the row id it comes from). ``--check`` exits 1 when any of
them differs from what the results file says (the default test suite does
the same).

Claims and rows of any section render: a section the tables below do not
know gets a generic table of its rows, and its claims a table of their own.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from benchmarks.tables.blocks import BLOCKS
from benchmarks.tables.markdown import CLAIM_NOTE, SECTION_TITLES, claim_tables, num, table
from benchmarks.tables.sections import shape_grid, shape_rows, thread_rows

HERE = Path(__file__).resolve().parent

BEGIN, END = "<!-- results:begin -->", "<!-- results:end -->"
README_BEGIN, README_END = "<!-- numbers:start -->", "<!-- numbers:end -->"

# Row tables of docs/benchmarks.md: (title, rows matching these fields, first column).
ROW_TABLES = [
    ("Store (in memory): snapshot", {"section": "core", "group": "snapshot"}, "param"),
    ("Store: diff and set per layout", {"section": "core", "group": "diff"}, "param"),
    ("Store: design measurements", {"section": "core", "group": "design"}, "subject"),
    ("DiskStore: snapshot", {"section": "disk", "group": "snapshot"}, "param"),
    ("DiskStore: diff after k changes", {"section": "disk", "group": "diff"}, "param"),
    ("DiskStore: restore after k changes", {"section": "disk", "group": "restore"}, "param"),
    (
        "DiskStore: 10 kB write vs the bare apsw floor",
        {"section": "disk", "group": "write_floor"},
        "param",
    ),
    (
        "Floor of restore: the same keys rewritten bare through apsw",
        {"section": "disk", "group": "restore_floor"},
        "param",
    ),
]
SAVER_TABLES = [
    ("memory", "Checkpointer, in memory (no durability)"),
    ("durable", "Checkpointer, durable on one file (fsync policy per row)"),
    ("postgres", "Checkpointer on PostgreSQL (same server)"),
    ("memory_dict", "Checkpointer, in memory, the plain-dict stream"),
    ("durable_dict", "Checkpointer, durable on one file, the plain-dict stream"),
    ("postgres_dict", "Checkpointer on PostgreSQL, the plain-dict stream"),
]


def _select(rows: dict[str, dict[str, Any]], **match: Any) -> list[str]:
    return [rid for rid, r in rows.items() if all(r.get(k) == v for k, v in match.items())]


def _latency_rows(rows: dict[str, dict[str, Any]], ids: list[str], first: str) -> list[str]:
    lines = [
        [
            f"`{rid}`",
            str(rows[rid].get(first, "")) if rows[rid].get(first) is not None else "",
            num(rows[rid]["p50"]),
            num(rows[rid]["p99"]),
            num(rows[rid]["n"]),
        ]
        for rid in ids
    ]
    return table(["row", first, "p50 µs", "p99 µs", "calls"], lines)


def _saver_rows(rows: dict[str, dict[str, Any]], ids: list[str]) -> list[str]:
    lines = [
        [
            f"`{rid}`",
            rows[rid]["saver"],
            rows[rid]["fsync"],
            rows[rid]["subject"],
            num(rows[rid]["param"]) if rows[rid]["param"] is not None else "",
            num(rows[rid]["pending_writes"]) if "pending_writes" in rows[rid] else "",
            num(rows[rid]["p50"]),
            num(rows[rid]["p99"]),
        ]
        for rid in ids
    ]
    header = ["row", "saver", "fsync", "op", "checkpoints", "pending writes", "p50 µs", "p99 µs"]
    return table(header, lines)


def _throughput_rows(rows: dict[str, dict[str, Any]], ids: list[str]) -> list[str]:
    lines = [
        [
            f"`{rid}`",
            rows[rid]["subject"],
            num(rows[rid].get("param")),
            num(rows[rid]["median"]),
            num(rows[rid].get("best")),
            num(rows[rid].get("scaling")),
            num(rows[rid].get("efficiency")),
        ]
        for rid in ids
    ]
    header = ["row", "what", "param", "ops/s median", "ops/s best", "scaling", "efficiency"]
    return table(header, lines)


def _generic_rows(rows: dict[str, dict[str, Any]], ids: list[str]) -> list[str]:
    """Rows of a section this report has no table for: every scalar figure they carry."""
    skip = {"section", "group", "subject", "param", "batch", "unit", "rounds", "rounds_p50"}
    lines = []
    for rid in ids:
        row = rows[rid]
        scalars = [
            f"{key} {num(value)}"
            for key, value in sorted(row.items())
            if key not in skip and isinstance(value, (int, float, str)) and value is not None
        ]
        lines.append(
            [f"`{rid}`", str(row.get("subject", "")), num(row.get("param")), "; ".join(scalars)]
        )
    return table(["row", "what", "param", "figures"], lines)


def _row_sections(rows: dict[str, dict[str, Any]]) -> list[str]:
    out: list[str] = []
    shown: set[str] = set()
    for title, match, first in ROW_TABLES:
        ids = [rid for rid in _select(rows, **match) if "p50" in rows[rid]]
        if ids:
            shown.update(ids)
            out += ["", f"### {title}", "", *_latency_rows(rows, ids, first)]
    for group, title in SAVER_TABLES:
        ids = _select(rows, saver_group=group)
        if ids:
            shown.update(ids)
            out += ["", f"### {title}", "", *_saver_rows(rows, ids)]
    tput = [rid for rid, r in rows.items() if r.get("unit") == "ops/s" and rid not in shown]
    known = {"core", "disk", "saver", "postgres"}
    tput = [rid for rid in tput if rows[rid].get("section") in known]
    if tput:
        shown.update(tput)
        out += ["", "### Throughput (median round of interleaved rounds)", ""]
        out += _throughput_rows(rows, tput)
    for section_rows in (shape_rows, thread_rows):
        lines, ids = section_rows(rows)
        out += lines
        shown.update(ids)
    rest: dict[tuple[str, str], list[str]] = {}
    for rid, row in rows.items():
        if rid not in shown:
            rest.setdefault((str(row.get("section", "")), str(row.get("group", ""))), []).append(
                rid
            )
    for (section, group), ids in rest.items():
        out += ["", f"### {section}: {group}", "", *_generic_rows(rows, ids)]
    return out


def _command(doc: dict[str, Any]) -> str:
    settings = doc["environment"].get("settings", {})
    quick = " --quick" if settings.get("quick") else ""
    iters, seed = settings.get("iters"), settings.get("seed")
    return f"python -m benchmarks.run{quick} --iters {iters} --seed {seed}"


def render(doc: dict[str, Any]) -> str:
    """The generated block (between the markers) for one results document."""
    env, rows = doc["environment"], doc["rows"]
    pk = env["packages"]
    settings = env["settings"]
    out: list[str] = [
        BEGIN,
        "<!-- generated by benchmarks/report.py from benchmarks/results.json; do not edit -->",
        "",
        "### Environment of this run",
        "",
        f"- `{_command(doc)}`",
        f"- Python {env['python']} ({env['implementation']}) on {env['platform']}, "
        f"{env['cpu_count']} CPUs"
        + (f", {env['memory_total_mb']:,} MB RAM" if env.get("memory_total_mb") else ""),
        "- " + ", ".join(f"{name} {ver}" for name, ver in sorted(pk.items()) if ver),
        f"- seed {settings.get('seed')}, iters {settings.get('iters')}, "
        f"rounds {settings.get('rounds')}, warm-up {settings.get('warmup')} calls, "
        f"quick={settings.get('quick')}; sections {', '.join(doc['sections'])}; "
        f"commit {env.get('git_commit') or 'none (uncommitted tree)'}; "
        f"taken {env['timestamp_utc']}",
    ]
    for what, why in sorted(doc.get("skipped", {}).items()):
        out.append(f"- not measured: `{what}`: {why}")
    out += ["", "### Claims", "", *claim_tables(doc["claims"], rows=True), "", CLAIM_NOTE]
    grid = shape_grid(doc["claims"])
    if grid:
        out += ["", "### State shapes at a glance", "", *grid]
    out += _row_sections(rows)
    out += ["", END]
    return "\n".join(out)


def apply(doc_text: str, block: str, begin: str = BEGIN, end_marker: str = END) -> str:
    """``doc_text`` with the marked block replaced by ``block``."""
    start, end = doc_text.find(begin), doc_text.find(end_marker)
    if start < 0 or end < start:
        raise ValueError(f"file lacks the {begin} ... {end_marker} markers")
    return doc_text[:start] + block + doc_text[end + len(end_marker) :]


def render_readme(doc: dict[str, Any]) -> str:
    """The README's numbers: every claim with its ratio, spread, floor and verdict."""
    env = doc["environment"]
    settings = env.get("settings", {})
    commit = env.get("git_commit") or "uncommitted tree"
    kind = (
        "a quick run (every claim at reduced size, as its label says)"
        if settings.get("quick")
        else "a full run"
    )
    lines = [
        README_BEGIN,
        "",
        f"From {kind}: `{_command(doc)}` on {env.get('cpu_count')} CPUs, Python "
        f"{env.get('python')}, {env.get('platform')}, commit `{commit}` "
        f"({env.get('timestamp_utc')}), {settings.get('rounds')} interleaved rounds. "
        "Ratios are of p50s of individual calls (or of ops/s) against the peer measured in "
        "the same rounds; durable is compared with durable. Every row and its setup: "
        "[docs/benchmarks.md](docs/benchmarks.md); where each store changes character: "
        "[docs/performance.md](docs/performance.md).",
        "",
        *claim_tables([c for c in doc["claims"] if c.get("section") != "shapes"], rows=False),
        *_shapes_readme(doc["claims"]),
        "",
        CLAIM_NOTE,
        "",
        README_END,
    ]
    return "\n".join(lines)


def _shapes_readme(claims: list[dict[str, Any]]) -> list[str]:
    """The shapes section's claims as grids (a claim per shape, call and store is too many rows)."""
    grid = shape_grid(claims)
    if not grid:
        return []
    title = SECTION_TITLES["shapes"]
    return ["", f"**{title}** (every claim: [docs/benchmarks.md](docs/benchmarks.md))", "", *grid]


def markers(name: str) -> tuple[str, str]:
    """The begin and end markers of block ``name``."""
    return f"<!-- results:{name}:begin -->", f"<!-- results:{name}:end -->"


def render_block(doc: dict[str, Any], name: str) -> str:
    """Block ``name`` with its markers, rendered from one results document."""
    begin, end = markers(name)
    body = BLOCKS[name][1](doc)
    lines = [begin, "<!-- generated by benchmarks/report.py from benchmarks/results.json -->"]
    return "\n".join([*lines, "", *body, "", end])


def render_docs(doc: dict[str, Any], docs_dir: Path) -> dict[Path, str]:
    """The wanted text of every docs file that holds named blocks."""
    wanted: dict[Path, str] = {}
    for name, (filename, _) in BLOCKS.items():
        path = docs_dir / filename
        text = wanted[path] if path in wanted else path.read_text()
        try:
            wanted[path] = apply(text, render_block(doc, name), *markers(name))
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    return wanted


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", type=Path, default=HERE / "results.json")
    parser.add_argument("--doc", type=Path, default=HERE.parent / "docs" / "benchmarks.md")
    parser.add_argument("--readme", type=Path, default=HERE.parent / "README.md")
    parser.add_argument("--docs-dir", type=Path, default=HERE.parent / "docs")
    parser.add_argument("--check", action="store_true", help="fail if the docs are stale")
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text())
    targets = [
        (args.doc, apply(args.doc.read_text(), render(results))),
        (
            args.readme,
            apply(args.readme.read_text(), render_readme(results), README_BEGIN, README_END),
        ),
        *render_docs(results, args.docs_dir).items(),
    ]
    stale = [path for path, wanted in targets if wanted != path.read_text()]
    if args.check:
        for path in stale:
            print(
                f"{path} does not match {args.results}; run python -m benchmarks.report",
                file=sys.stderr,
            )
        return 1 if stale else 0
    for path, wanted in targets:
        path.write_text(wanted)
        print(f"updated {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
