"""The swarmstate benchmark suite: every figure the docs quote, with its peer, in one run.

Usage::

    python benchmarks/run.py --iters 5000 --seed 7            # the full run
    python benchmarks/run.py --quick                          # CI smoke, < 1 minute
    python benchmarks/run.py --pg-dsn postgresql://...        # adds the PostgreSQL section
    python benchmarks/run.py --sections core,disk --out r.json

Writes ``benchmarks/results.json`` (rows keyed by a stable id, the issue
limits computed from them, and the environment), then renders the charts
from that file (``benchmarks/charts.py``). ``benchmarks/report.py`` turns the
same file into the tables of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))

from _harness import Results  # noqa: E402
from sections_core import section_core  # noqa: E402
from sections_disk import section_disk  # noqa: E402
from sections_saver import section_postgres, section_saver  # noqa: E402

from swarmstate._bench import environment  # noqa: E402

SECTIONS = ("core", "disk", "saver", "postgres")


@dataclass
class Config:
    """Sizes and call counts of one run; ``--quick`` shrinks them."""

    iters: int
    seed: int
    quick: bool
    rounds: int = 5
    warmup: int = 50
    snapshot_sizes: list[int] = field(default_factory=lambda: [100, 1_000, 10_000, 50_000, 100_000])
    # (row label, namespaces, keys per namespace)
    diff_layouts: list[tuple[str, int, int]] = field(
        default_factory=lambda: [
            ("ns2000", 2_000, 10),
            ("ns20000", 20_000, 10),
            ("one1000", 1, 1_000),
            ("one100000", 1, 100_000),
        ]
    )
    throughput_entries: int = 20_000
    thread_counts: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    disk_sizes: list[int] = field(default_factory=lambda: [1_000, 100_000])
    disk_changes: list[int] = field(default_factory=lambda: [1, 100])
    writer_counts: list[int] = field(default_factory=lambda: [1, 2, 4])
    writes_per_process: int = 2_000
    writer_rounds: int = 3
    thread_lengths: list[int] = field(default_factory=lambda: [5, 50, 500, 2_000])
    messages: str = "dict"
    pg_dsn: str | None = None

    @classmethod
    def make(
        cls, iters: int, seed: int, quick: bool, pg_dsn: str | None, messages: str = "dict"
    ) -> Config:
        cfg = cls(iters=iters, seed=seed, quick=quick, pg_dsn=pg_dsn, messages=messages)
        if quick:
            cfg.rounds, cfg.warmup = 3, 10
            cfg.snapshot_sizes = [100, 1_000, 10_000]
            cfg.diff_layouts = [("ns200", 200, 10), ("one1000", 1, 1_000)]
            cfg.throughput_entries = 2_000
            cfg.thread_counts = [1, 2, 4]
            cfg.disk_sizes = [1_000, 5_000]
            cfg.writer_counts = [1, 2]
            cfg.writes_per_process = 200
            cfg.writer_rounds = 1
            cfg.thread_lengths = [5, 50, 200]
        return cfg

    def rng(self, section: str) -> random.Random:
        """The section's generator: seeded from ``--seed`` and the section name."""
        return random.Random(f"{self.seed}:{section}")

    def settings(self) -> dict[str, Any]:
        out = asdict(self)
        out["pg_dsn"] = "given" if self.pg_dsn else None  # never record credentials
        return out


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=None, help="calls per measured row")
    parser.add_argument("--seed", type=int, default=7, help="seed of every generated value")
    parser.add_argument("--quick", action="store_true", help="small sizes, < 1 minute")
    parser.add_argument("--pg-dsn", default=None, help="PostgreSQL server for that section")
    parser.add_argument("--out", type=Path, default=HERE / "results.json")
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)}",
    )
    parser.add_argument(
        "--messages",
        choices=("dict", "langchain"),
        default="dict",
        help="checkpoint messages as plain dicts (default) or langchain_core objects",
    )
    parser.add_argument("--no-charts", action="store_true", help="skip rendering charts")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    iters = args.iters if args.iters is not None else (200 if args.quick else 5_000)
    cfg = Config.make(iters, args.seed, args.quick, args.pg_dsn, args.messages)
    wanted = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(wanted) - set(SECTIONS))
    if unknown:
        print(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)}", file=sys.stderr)
        return 2
    res = Results()
    runners: dict[str, Callable[[Config, Results, Path], None]] = {
        "core": section_core,
        "disk": section_disk,
        "saver": section_saver,
        "postgres": section_postgres,
    }
    durations: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="swarmstate-bench-") as tmp:
        for name in SECTIONS:
            if name not in wanted:
                continue
            if name == "postgres" and not cfg.pg_dsn:
                res.skipped["postgres"] = "no --pg-dsn given"
                continue
            print(f"== {name}", flush=True)
            t0 = time.perf_counter()
            runners[name](cfg, res, Path(tmp) / name)
            durations[name] = round(time.perf_counter() - t0, 1)
            print(f"   {name}: {durations[name]} s", flush=True)
    doc = {
        "schema": 1,
        "environment": environment(cfg.settings()),
        "sections": wanted,
        "section_seconds": durations,
        "rows": res.rows,
        "limits": res.limits,
        "skipped": res.skipped,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {args.out}")
    for lim in res.limits:
        verdict = {True: "holds", False: "MISSED", None: "not measured"}[lim["holds"]]
        print(f"  issue {lim['issue']}: {lim['claim']}: ratio {lim['ratio']} -> {verdict}")
    if not args.no_charts:
        from charts import render

        render(args.out, args.out.parent / "charts")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
