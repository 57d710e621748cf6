"""The benchmark suite's own guarantees: seeded data, docs that match the results.

The ``swarmstate benchmark`` command is checked in ``test_cli.py``.
"""

from __future__ import annotations

import copy
import fnmatch
import json
import re
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
