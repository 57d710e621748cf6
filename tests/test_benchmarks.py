"""The benchmark suite's own guarantees: seeded data, docs that match the results, the CLI."""

from __future__ import annotations

import copy
import fnmatch
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import _harness as harness  # noqa: E402
import report  # noqa: E402
from run import Config  # noqa: E402


def _generate(seed: int) -> list[str]:
    """Build a sample of every kind of benchmark data the way run.py does."""
    cfg = Config.make(200, seed, quick=True, pg_dsn=None)
    rng = cfg.rng("core.snapshot")
    entries = harness.gen_entries(rng, 30, 10)
    changes = harness.pick_changes(cfg.rng("core.diff"), entries, 5, 1)
    blob = harness.blob_value(cfg.rng("disk.floor"), 1_024)
    stream = harness.CheckpointStream(cfg.rng("memory.stream"), 12)
    writes = [stream.writes(cfg.rng("memory.writes"), i) for i in range(3)]
    return [harness.fingerprint(x) for x in (entries, changes, blob, stream.items, writes)]


def test_same_seed_builds_identical_benchmark_data() -> None:
    assert _generate(7) == _generate(7)


def test_a_different_seed_builds_different_data() -> None:
    first, other = _generate(7), _generate(8)
    assert all(a != b for a, b in zip(first, other, strict=True))


def test_checkpoint_stream_ids_sort_in_step_order() -> None:
    stream = harness.CheckpointStream(harness.random.Random(3), 50)
    ids = [cp["id"] for cp, _, _ in stream.items]
    assert ids == sorted(ids)
    assert len(set(ids)) == 50


def test_docs_tables_match_the_results_file() -> None:
    results = ROOT / "benchmarks" / "results.json"
    doc = ROOT / "docs" / "benchmarks.md"
    block = report.render(json.loads(results.read_text()))
    current = doc.read_text()
    assert report.apply(current, block) == current, (
        "docs/benchmarks.md differs from benchmarks/results.json; run python benchmarks/report.py"
    )


def test_readme_numbers_match_the_results_file() -> None:
    results = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    readme = (ROOT / "README.md").read_text()
    block = report.render_readme(results)
    assert report.apply(readme, block, report.README_BEGIN, report.README_END) == readme, (
        "README.md numbers differ from benchmarks/results.json; run python benchmarks/report.py"
    )


def _results() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    return doc


def test_figures_quoted_by_the_other_docs_match_the_results_file() -> None:
    stale = [
        path.name
        for path, wanted in report.render_docs(_results(), ROOT / "docs").items()
        if wanted != path.read_text()
    ]
    assert not stale, f"{stale} differ from results.json; run python benchmarks/report.py"


def test_a_changed_result_makes_the_docs_stale() -> None:
    """The comparison above can fail: one cited row moving changes a generated block."""
    doc = _results()
    moved = copy.deepcopy(doc)
    moved["rows"]["disk.restore.100.100000"]["p50"] *= 1.5
    before = report.render_docs(doc, ROOT / "docs")
    after = report.render_docs(moved, ROOT / "docs")
    assert [p.name for p in before if before[p] != after[p]] == ["performance.md", "disk.md"]


def test_every_block_cites_rows_that_exist() -> None:
    doc = _results()
    for name in report.BLOCKS:
        block = report.render_block(doc, name)
        assert "not measured" not in block, f"block {name} cites a row the results file lacks"


ROW_ID = re.compile(r"`((?:core|disk|durable|memory|postgres)\.[^`]+)`")


def test_every_row_id_cited_in_the_docs_exists() -> None:
    rows = set(_results()["rows"])
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for cited in ROW_ID.findall(path.read_text()):
            assert fnmatch.filter(rows, cited), f"{path.name} cites `{cited}`: no such row"


# A figure with a unit, or a ratio like "1.2x": only generated blocks may hold one.
FIGURE = re.compile(r"\d[\d,.]*\s?(?:µs|us|ms|ops/s|writes/s|%)|\b\d+(?:\.\d+)?x\b")
BLOCK = re.compile(r"<!-- results:(?:[\w.]+:)?begin -->.*?<!-- results:(?:[\w.]+:)?end -->", re.S)


@pytest.mark.parametrize(
    "name",
    [
        "benchmarks.md",
        "performance.md",
        "disk.md",
        "postgres.md",
        "langgraph.md",
        "architecture.md",
    ],
)
def test_docs_quote_no_figures_outside_generated_blocks(name: str) -> None:
    prose = BLOCK.sub("", (ROOT / "docs" / name).read_text())
    assert not FIGURE.findall(prose), f"hand-typed figures in docs/{name}: {FIGURE.findall(prose)}"


def test_every_limit_in_the_results_file_names_rows_that_exist() -> None:
    doc = json.loads((ROOT / "benchmarks" / "results.json").read_text())
    for lim in doc["limits"]:
        if lim["holds"] is None:
            continue
        assert lim["numerator"] in doc["rows"]
        assert lim["denominator"] in doc["rows"]


def test_cli_does_not_import_langgraph_or_matplotlib() -> None:
    code = (
        "import sys, swarmstate.cli; "
        "bad = [m for m in sys.modules if m.split('.')[0] in ('langgraph', 'matplotlib')]; "
        "print(bad); raise SystemExit(1 if bad else 0)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stdout + out.stderr


@pytest.mark.slow
def test_swarmstate_benchmark_writes_every_section_with_the_environment(tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "swarmstate",
            "benchmark",
            "--tiny",
            "--no-progress",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert 'pip install "swarmstate[bench,langgraph]"' in proc.stdout
    doc = json.loads(out.read_text())
    env = doc["environment"]
    for field in ("python", "platform", "cpu_count", "packages", "settings"):
        assert env[field], field
    assert env["packages"]["swarmstate"]
    assert set(doc["stores"]) == {"Store", "DiskStore NORMAL", "DiskStore FULL"}
    for row in doc["stores"].values():
        assert row["set"]["p50"] > 0
        assert row["get"]["n"] > 0
    assert [w["processes"] for w in doc["writers"]] == [1, 2]
    assert all(w["errors"] == 0 and not w["failures"] for w in doc["writers"]), doc["writers"]
    assert doc["footprint"]["max_rss_mb"] > 0
    assert doc["skipped"] == {}


def test_inspect_reports_a_foreign_file_without_a_traceback(tmp_path: Path) -> None:
    foreign = tmp_path / "notes.db"
    foreign.write_text("not a database\n")
    before = foreign.read_bytes()
    out = subprocess.run(
        [sys.executable, "-m", "swarmstate", "inspect", str(foreign)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 1
    assert "is not a SQLite database" in out.stderr
    assert "Traceback" not in out.stderr
    assert foreign.read_bytes() == before


def test_inspect_lists_namespaces_and_snapshots_of_a_disk_store(tmp_path: Path) -> None:
    from swarmstate.backends.disk import DiskStore

    path = tmp_path / "state.db"
    with DiskStore(path) as store:
        store.set_many([("a", "x", 1), ("a", "y", 2), ("b", "z", 3)])
        store.snapshot()
    out = subprocess.run(
        [sys.executable, "-m", "swarmstate", "inspect", str(path)],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "3 entries in 2 namespaces" in out.stdout
    assert "'a': 2" in out.stdout
    assert "1 snapshot(s)" in out.stdout
