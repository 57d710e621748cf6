"""The swarmstate benchmark suite: every figure the docs quote, with its peer, in one run.

Usage::

    python -m benchmarks.run --quick                     # every claim at reduced size
    python -m benchmarks.run --iters 5000 --seed 7       # the full run
    python -m benchmarks.run --pg-dsn postgresql://...   # adds the PostgreSQL section
    python -m benchmarks.run --sections core,disk --out r.json --charts
    python -m benchmarks.run --publish --pg-dsn ...      # rewrite what the repository holds

Without ``--out`` the results go to a new file under ``benchmarks/runs/``
(ignored by git), named after the time and mode of the run; nothing tracked
changes. ``--charts [DIR]`` renders the charts from that file (into DIR, or
a ``charts`` folder beside the results file). ``--publish`` is the full
regeneration: results into ``benchmarks/results.json``, charts into
``benchmarks/charts``, then the README table and the docs' generated blocks
(``python -m benchmarks.report``).

A section is a module with a function ``(cfg, results, workdir) -> None``,
listed in ``SECTIONS`` below.
"""

from __future__ import annotations

import argparse
import importlib
import json
import multiprocessing
import os
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness.config import Config
from benchmarks.harness.results import Results, pooled_rows
from swarmstate._bench import environment

HERE = Path(__file__).resolve().parent

# name -> "module:function" under benchmarks/, run in this order. A section is one line here.
SECTIONS: dict[str, str] = {
    "core": "sections.core:section_core",
    "disk": "sections.disk:section_disk",
    "saver": "sections.saver:section_saver",
    "postgres": "sections.postgres:section_postgres",
    "growth": "sections.growth:section_growth",  # a growing LangGraph conversation
    "workers": "sections.workers:section_workers",  # what the several-workers checks cost
    "retention": "sections.retention:section_retention",  # expire, keep_last, reclaim
    "shapes": "sections.shapes.section:section_shapes",  # every state shape against its peer (#28)
    "threads": "sections.threads.section:section_threads",  # 1,000 to 100,000 threads (#31)
    "server": "sections.server.section:section_server",  # users awaiting one event loop (#39)
}
PUBLISHED = HERE / "results.json"
SCHEMA = 2


def section(name: str) -> Callable[[Config, Results, Path], None]:
    """The function registered for section ``name`` (its module is imported only now)."""
    module, function = SECTIONS[name].split(":")
    runner: Callable[[Config, Results, Path], None] = getattr(
        importlib.import_module(f"benchmarks.{module}"), function
    )
    return runner


def _section(name: str, cfg: Config, workdir: Path, processes: int) -> tuple[Any, Any, Any]:
    """Rows, claims and skipped rows of one section, run in ``processes`` fresh interpreters.

    With more than one, each runs the whole section; their rows are pooled
    (:func:`harness.results.pooled_rows`) and every claim is judged again on the
    pooled rounds, so a claim's spread also holds what changes from one
    process to the next (where the allocator put things, what the machine was
    doing), not only from one round to the next within one.
    """
    runs = [_in_own_process(name, cfg, workdir / f"run{i}") for i in range(processes)]
    if processes == 1:
        return runs[0][:3]
    res = Results()
    res.rows = pooled_rows([run[0] for run in runs])
    for spec in runs[0][3]:
        res.claim(**spec)
    return res.rows, res.claims, runs[0][2]


def _in_own_process(name: str, cfg: Config, workdir: Path) -> tuple[Any, Any, Any, Any]:
    """Run one section in a fresh interpreter; its rows, claims and skipped rows.

    Every section starts from the same empty heap: the objects an earlier
    section left alive make the cyclic collector's full passes longer and
    move when they fall, which slowed one contender of a read by up to 1.7x
    and not its peer (the growth section's ``get_state_history`` rows). A
    plain spawned process, not a process pool: the sections start processes
    of their own, and a pool's worker made the core section's microsecond
    calls 1.5x slower than the same calls here.
    """
    spawn = multiprocessing.get_context("spawn")
    receive, send = spawn.Pipe(duplex=False)
    child = spawn.Process(target=_section_rows, args=(name, cfg, workdir, send))
    child.start()
    send.close()
    try:
        outcome = receive.recv()
    except EOFError:
        outcome = ("error", f"the process running section {name} ended without a result")
    finally:
        child.join()
    if outcome[0] == "error":
        raise RuntimeError(f"section {name} failed: {outcome[1]}")
    return outcome[1]


def _section_rows(name: str, cfg: Config, workdir: Path, send: Any) -> None:
    res = Results()
    try:
        section(name)(cfg, res, workdir)
    except BaseException:
        send.send(("error", traceback.format_exc()))
        raise
    finally:
        sys.stdout.flush()
    send.send(("ok", (res.rows, res.claims, res.skipped, res.specs)))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=None, help="calls per measured row")
    parser.add_argument(
        "--rounds",
        type=int,
        default=None,
        help="interleaved rounds of per-call rows (default 100, quick 120)",
    )
    parser.add_argument("--seed", type=int, default=7, help="seed of every generated value")
    parser.add_argument("--quick", action="store_true", help="every claim at reduced size")
    parser.add_argument("--pg-dsn", default=None, help="PostgreSQL server for that section")
    parser.add_argument(
        "--out", type=Path, default=None, help="results file (default: a new file in runs/)"
    )
    parser.add_argument(
        "--charts",
        type=Path,
        nargs="?",
        const=Path(),
        default=None,
        metavar="DIR",
        help="render the charts into DIR (without DIR: a charts folder beside the results)",
    )
    parser.add_argument(
        "--publish",
        action="store_true",
        help="write benchmarks/results.json and charts, then rewrite the README and docs tables",
    )
    parser.add_argument(
        "--processes",
        type=int,
        default=None,
        help="run each section this many times, each in a new interpreter, and pool the "
        "rounds (default 1, quick 2)",
    )
    parser.add_argument(
        "--sections",
        default=",".join(SECTIONS),
        help=f"comma-separated subset of {','.join(SECTIONS)}",
    )
    return parser.parse_args(argv)


def _default_out(quick: bool) -> Path:
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    return HERE / "runs" / f"{stamp}-{'quick' if quick else 'full'}.json"


def run(cfg: Config, wanted: list[str], processes: int = 1) -> dict[str, Any]:
    """Run the wanted sections (each in ``processes`` interpreters); the results document."""
    res = Results()
    durations: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="swarmstate-bench-") as tmp:
        for name in SECTIONS:
            if name not in wanted:
                continue
            print(f"== {name}", flush=True)
            t0 = time.perf_counter()
            rows, claims, skipped = _section(name, cfg, Path(tmp) / name, processes)
            res.rows.update(rows)
            res.claims.extend(claims)
            res.skipped.update(skipped)
            durations[name] = round(time.perf_counter() - t0, 1)
            print(f"   {name}: {durations[name]} s", flush=True)
    return {
        "schema": SCHEMA,
        "environment": environment(cfg.settings()),
        "sections": wanted,
        "section_seconds": durations,
        "rows": res.rows,
        "claims": res.claims,
        "skipped": res.skipped,
    }


def summary(doc: dict[str, Any]) -> list[str]:
    """One line per claim: ratio, its spread, the limit, the floor, the verdict."""
    lines = []
    for claim in doc["claims"]:
        if claim["ratio"] is None:
            lines.append(f"  {claim['label']}: not measured ({claim.get('note', '')})")
            continue
        floor = f", floor {claim['floor_ratio']:.3g}" if claim.get("floor_ratio") else ""
        lines.append(
            f"  {claim['label']}: {claim['ratio']:.3g} [{claim['q1']:.3g}-{claim['q3']:.3g}] "
            f"{claim['op']} {claim['bound']:g}{floor} -> {claim['verdict']}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    wanted = [s.strip() for s in args.sections.split(",") if s.strip()]
    unknown = sorted(set(wanted) - set(SECTIONS))
    if unknown:
        print(f"unknown sections {unknown}; choose from {', '.join(SECTIONS)}", file=sys.stderr)
        return 2
    if args.publish:
        if args.out not in (None, PUBLISHED):
            print("--publish writes benchmarks/results.json; drop --out", file=sys.stderr)
            return 2
        args.out = PUBLISHED
        args.charts = args.charts if args.charts not in (None, Path()) else HERE / "charts"
    out: Path = args.out or _default_out(args.quick)
    cfg = Config.make(args.iters, args.seed, args.quick, args.pg_dsn)
    if args.rounds is not None:
        cfg.rounds = max(1, args.rounds)
        cfg.throughput_rounds = min(cfg.throughput_rounds, cfg.rounds)
    cfg.hash_seed = os.environ.get("PYTHONHASHSEED")
    processes = args.processes if args.processes is not None else 2 if args.quick else 1
    if processes < 1:
        print(f"--processes must be at least 1, got {processes}", file=sys.stderr)
        return 2
    doc = run(cfg, wanted, processes)
    doc["processes"] = processes
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"wrote {out}")
    print("\n".join(summary(doc)))
    if args.charts is not None:
        from benchmarks.charts import render

        charts = out.parent / "charts" if args.charts == Path() else args.charts
        for path in render(out, charts):
            print(f"wrote {path}")
    if args.publish:
        from benchmarks import report

        return report.main([str(out)])
    return 0


def pin_hash_seed(seed: int) -> None:
    """Re-run this process with ``PYTHONHASHSEED`` from ``--seed``, unless the caller set one.

    String hashes decide where keys land in the in-memory store's hash trie
    (and the order of sets); with a random hash seed per process, two runs
    of one seed measure different layouts.
    """
    if "PYTHONHASHSEED" in os.environ:
        return
    os.environ["PYTHONHASHSEED"] = str(seed % 4_294_967_296)
    os.execv(sys.executable, [sys.executable, "-m", "benchmarks.run", *sys.argv[1:]])


if __name__ == "__main__":
    pin_hash_seed(parse_args(sys.argv[1:]).seed)
    raise SystemExit(main())
