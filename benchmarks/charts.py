"""Render the benchmark charts (SVG) from a results file, never from live measurements.

python -m benchmarks.charts [benchmarks/results.json] [--out benchmarks/charts]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent


def _rows(doc: dict[str, Any], **match: Any) -> list[tuple[str, dict[str, Any]]]:
    return [
        (rid, row)
        for rid, row in doc["rows"].items()
        if all(row.get(k) == v for k, v in match.items())
    ]


def _kind(row: dict[str, Any]) -> str:
    """A saver row's operation; a floor row takes the operation it is measured beside."""
    if row["group"] != "floor":
        return str(row["group"])
    return str(row.get("batch", "")).rsplit(".", 1)[-1]


def _save(fig: Any, out: Path, name: str, written: list[Path]) -> None:
    path = out / f"{name}.svg"
    # A fixed hash salt and no date keep the SVG identical for identical data.
    fig.savefig(path, format="svg", metadata={"Date": None})
    written.append(path)


def render(results: Path, out: Path) -> list[Path]:
    """Write one SVG per chart into ``out``; returns the paths written."""
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "swarmstate"
    from matplotlib import pyplot

    doc = json.loads(results.read_text())
    out.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    caption = f"seed {doc['environment']['settings'].get('seed')}, p50 of individual calls"

    # 1. Snapshot cost vs state size, against copy.deepcopy.
    snap = _rows(doc, section="core", group="snapshot")
    if snap:
        fig, ax = pyplot.subplots(figsize=(6.4, 4))
        for subject in sorted({r["subject"] for _, r in snap}):
            pts = sorted((r["param"], r["p50"]) for _, r in snap if r["subject"] == subject)
            ax.plot([p for p, _ in pts], [v for _, v in pts], marker="o", label=subject)
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="entries",
            ylabel="µs per call (p50)",
            title=f"Snapshot cost vs state size ({caption})",
        )
        ax.legend()
        fig.tight_layout()
        _save(fig, out, "snapshot_vs_size", written)
        pyplot.close(fig)

    # 2. Diff cost per layout, 1 and 100 changes, with one Store.set for scale.
    diff = _rows(doc, section="core", group="diff")
    if diff:
        labels = sorted({r["param"] for _, r in diff}, key=lambda p: (p.startswith("one"), p))
        subjects = sorted({r["subject"] for _, r in diff})
        fig, ax = pyplot.subplots(figsize=(7, 4))
        width = 0.8 / len(subjects)
        for j, subject in enumerate(subjects):
            vals = [
                next(
                    (r["p50"] for _, r in diff if r["param"] == lab and r["subject"] == subject), 0
                )
                for lab in labels
            ]
            ax.bar([i + j * width for i in range(len(labels))], vals, width, label=subject)
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(labels))], labels)
        ax.set(yscale="log", ylabel="µs per call (p50)", title="Store diff cost vs layout")
        ax.legend(fontsize=8)
        fig.tight_layout()
        _save(fig, out, "diff_vs_layout", written)
        pyplot.close(fig)

    # 3. Latest read as the thread grows, one panel per saver group, with its floor.
    for group in ("memory", "durable", "postgres"):
        latest = _rows(doc, saver_group=group, group="latest")
        if not latest:
            continue
        floor = _rows(doc, saver_group=group, group="floor", batch=f"{group}.latest")
        fig, ax = pyplot.subplots(figsize=(6.4, 4))
        for saver in sorted({r["saver"] for _, r in latest}):
            pts = sorted((r["param"], r["p50"]) for _, r in latest if r["saver"] == saver)
            ax.plot([p for p, _ in pts], [v for _, v in pts], marker="o", label=saver)
        if floor:
            pts = sorted((r["param"], r["p50"]) for _, r in floor)
            ax.plot([p for p, _ in pts], [v for _, v in pts], "k--", label="floor")
        ax.set(
            xscale="log",
            xlabel="checkpoints in the thread",
            ylabel="µs (p50)",
            title=f"get_tuple(latest) as the thread grows: {group}",
        )
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=8)
        fig.tight_layout()
        _save(fig, out, f"latest_{group}", written)
        pyplot.close(fig)

    # 4. Checkpoint latency per group: put p50/p99, put_writes p50, list(limit=10) p50.
    for group in ("memory", "durable", "postgres"):
        rows = [(rid, r) for rid, r in _rows(doc, saver_group=group) if _kind(r) != "latest"]
        if not rows:
            continue
        savers = sorted({r["saver"] for _, r in rows})
        metrics = [("put", "p50"), ("put", "p99"), ("put_writes", "p50"), ("list", "p50")]
        fig, ax = pyplot.subplots(figsize=(7.5, 4))
        width = 0.8 / len(savers)
        for j, saver in enumerate(savers):
            vals = []
            for grp, metric in metrics:
                found = [r[metric] for _, r in rows if r["saver"] == saver and _kind(r) == grp]
                vals.append(found[0] if found else 0)
            ax.bar([i + j * width for i in range(len(metrics))], vals, width, label=saver)
        ax.set_xticks(
            [i + 0.4 - width / 2 for i in range(len(metrics))], [f"{g} {m}" for g, m in metrics]
        )
        ax.set(yscale="log", ylabel="µs", title=f"Checkpoint latency: {group} group")
        ax.legend(fontsize=7)
        fig.tight_layout()
        _save(fig, out, f"checkpoint_{group}", written)
        pyplot.close(fig)

    # 5. Threads and writer processes.
    for group, title, xlabel in (
        ("threads", "Store set+get throughput vs threads", "threads"),
        ("writers", "DiskStore writer processes on one file", "processes"),
    ):
        rows = _rows(doc, group=group)
        if not rows:
            continue
        pts = sorted((r["param"], r["median"]) for _, r in rows)
        fig, ax = pyplot.subplots(figsize=(5.5, 3.6))
        ax.bar([str(p) for p, _ in pts], [v for _, v in pts])
        ax.set(xlabel=xlabel, ylabel="total ops/s (median round)", title=title)
        fig.tight_layout()
        _save(fig, out, f"{group}_scaling", written)
        pyplot.close(fig)

    # 6. A growing conversation: bytes stored, and put, turn after turn.
    def by_turn(row: dict[str, Any]) -> tuple[list[int], list[float]]:
        if row["group"] == "bytes":
            pts = sorted((int(t), v / 1e6) for t, v in row.get("bytes_at", {}).items())
            return [t for t, _ in pts], [v for _, v in pts]
        values = list(row.get("by_turn", []))
        return list(range(1, len(values) + 1)), values

    for graph in ("plain", "delta"):
        for what, ylabel, title in (
            ("bytes", "MB stored", "Bytes stored as a conversation grows"),
            ("put", "µs, p50 of the turn's puts", "put as a conversation grows"),
        ):
            rows = sorted(_rows(doc, section="growth", group=what, graph=graph), key=str)
            if not rows:
                continue
            fig, ax = pyplot.subplots(figsize=(6.4, 4))
            for _, row in rows:
                xs, ys = by_turn(row)
                ax.plot(xs, ys, marker="o" if what == "bytes" else None, label=row["subject"])
            ax.set(yscale="log", xlabel="turns", ylabel=ylabel, title=f"{title} ({graph} graph)")
            ax.legend(fontsize=7)
            fig.tight_layout()
            _save(fig, out, f"growth_{what}_{graph}", written)
            pyplot.close(fig)

    # 7. Many threads: each thread-level call's cost against the number of threads.
    for store in ("disk", "postgres"):
        rows = _rows(doc, section="threads", store=store)
        calls = [(g, t) for g, t in THREAD_CALLS if any(r["group"] == g for _, r in rows)]
        if not calls:
            continue
        fig, ax = pyplot.subplots(figsize=(7, 4.4))
        for k, (group, title) in enumerate(calls):
            for saver in sorted({r["subject"] for _, r in rows if r["group"] == group}):
                pts = sorted(
                    (r["param"], r["p50"] / 1e3)
                    for _, r in rows
                    if r["group"] == group and r["subject"] == saver
                )
                # One colour per call; ours solid, the peer dashed.
                style = "-" if saver.startswith("SwarmStateSaver") else "--"
                ax.plot(
                    [p for p, _ in pts], [v for _, v in pts], style, marker="o", color=f"C{k}",
                    label=f"{title}, {saver}",
                )  # fmt: skip
        ax.set(
            xscale="log",
            yscale="log",
            xlabel="threads in the store",
            ylabel="ms per call (p50)",
            title=f"Thread-level calls as threads pile up: {store}",
        )
        ax.legend(fontsize=6)
        fig.tight_layout()
        _save(fig, out, f"threads_{store}", written)
        pyplot.close(fig)
    return written


THREAD_CALLS = (
    ("delete_thread", "delete_thread"),
    ("list10", "list(None, limit=10)"),
    ("retain", "retain, nothing expired"),
    ("first_put", "a new thread's put"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="?", type=Path, default=HERE / "results.json")
    parser.add_argument("--out", type=Path, default=HERE / "charts")
    args = parser.parse_args()
    for path in render(args.results, args.out):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
