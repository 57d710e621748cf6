"""``swarmstate benchmark``: store and checkpointer workloads on this machine, for bug reports.

``swarmstate._bench`` holds the measuring. The stores are timed call by call;
the checkpointer rows (with the ``langgraph`` extra) replay LangGraph's
recorded call pattern (``put_writes`` of every task, then ``put``) on
``SwarmStateSaver`` and LangGraph's own savers, in memory and on a file. The
PostgreSQL rows and the whole comparison live in ``benchmarks/run.py``.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

from swarmstate import _bench
from swarmstate._errors import StorageError
from swarmstate.backends.memory import Store

__all__ = ["LANGGRAPH_HINT", "check_writable", "format_report", "run_benchmark", "write_result"]

LANGGRAPH_HINT = (
    "For the PostgreSQL rows and the whole comparison: "
    'pip install "pyswarmstate[bench,disk,langgraph,postgres]" and run '
    "python benchmarks/run.py from a source checkout (--pg-dsn for the PostgreSQL rows)."
)


@dataclass(frozen=True)
class _Sizes:
    """How much work each part of ``swarmstate benchmark`` does."""

    calls: int  # per-call latency samples per store (FULL gets a tenth)
    batch: int  # entries written by the set_many throughput run
    writers: tuple[int, ...]
    writes_per_process: int
    rounds: int
    saver_calls: int  # calls per op and saver, over all rounds
    saver_lengths: tuple[int, ...]  # checkpoints per thread for the latest reads


_SIZES = {
    "tiny": _Sizes(
        calls=30, batch=200, writers=(1, 2), writes_per_process=20, rounds=2,
        saver_calls=8, saver_lengths=(5, 50),
    ),
    "default": _Sizes(
        calls=2_000, batch=10_000, writers=(1, 2, 4), writes_per_process=500, rounds=3,
        saver_calls=200, saver_lengths=(5, 200),
    ),
    "full": _Sizes(
        calls=10_000, batch=50_000, writers=(1, 2, 4, 8), writes_per_process=2_000, rounds=5,
        saver_calls=500, saver_lengths=(5, 200, 1_000),
    ),
}  # fmt: skip


class _TextBar:
    """A minimal progress bar on stderr for when tqdm is not installed."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total, self.done, self.stream = total, 0, stream

    def set_description(self, text: str) -> None:
        self._draw(text)

    def update(self, n: int = 1) -> None:
        self.done += n
        self._draw("")

    def _draw(self, text: str) -> None:
        width = 30
        filled = width * self.done // max(1, self.total)
        bar = "#" * filled + "-" * (width - filled)
        self.stream.write(f"\r[{bar}] {self.done}/{self.total} {text:<40.40}")
        self.stream.flush()

    def close(self) -> None:
        self.stream.write("\n")
        self.stream.flush()


class _NullBar:
    """Progress reporting switched off."""

    def set_description(self, text: str) -> None:
        pass

    def update(self, n: int = 1) -> None:
        pass


@contextmanager
def _progress(total: int, enabled: bool) -> Iterator[Any]:
    if not enabled:
        yield _NullBar()
        return
    try:
        from tqdm import tqdm  # type: ignore[import-untyped]

        bar: Any = tqdm(total=total, file=sys.stderr, leave=False)
    except ImportError:
        bar = _TextBar(total, sys.stderr)
    try:
        yield bar
    finally:
        bar.close()


def _disk_store_class() -> tuple[Any, str | None]:
    """DiskStore, or None and the reason it cannot be used (which names the extra)."""
    try:
        from swarmstate.backends.disk import DiskStore
    except ImportError as exc:
        return None, str(exc)
    return DiskStore, None


def _setter(store: Any, values: list[Any]) -> Callable[[int], object]:
    def call(i: int) -> object:
        return store.set(f"ns{i % 16}", f"k{i:08d}", values[i % 256])

    return call


def _getter(store: Any) -> Callable[[int], object]:
    def call(i: int) -> object:
        return store.get(f"ns{i % 16}", f"k{i:08d}")

    return call


def _snapshotter(store: Any) -> Callable[[int], object]:
    def call(i: int) -> object:
        return store.snapshot()

    return call


def _store_rows(
    sizes: _Sizes, tmp: Path, step: Callable[[str], None]
) -> tuple[dict[str, Any], dict[str, str]]:
    """Per-call set/get latency and set_many throughput of each store."""
    disk_cls, why = _disk_store_class()
    factories: dict[str, tuple[Callable[[], Any], str, int]] = {
        "Store": (Store, "none (in memory)", sizes.calls),
    }
    skipped: dict[str, str] = {}
    if disk_cls is None:
        skipped["DiskStore"] = str(why)
    else:
        for level in ("NORMAL", "FULL"):

            def open_disk(level: str = level) -> Any:
                return disk_cls(tmp / f"bench-{level}.db", synchronous=level)

            factories[f"DiskStore {level}"] = (
                open_disk,
                f"WAL, synchronous={level}",
                sizes.calls if level == "NORMAL" else max(20, sizes.calls // 10),
            )
    import random

    rng = random.Random(7)
    values = _bench.make_values(rng, 256)
    rows: dict[str, Any] = {}
    for name, (factory, fsync, calls) in factories.items():
        step(f"{name}: set/get")
        store = factory()
        ops = [_bench.Op("set", _setter(store, values)), _bench.Op("get", _getter(store))]
        samples = _bench.interleave(ops, calls=calls, rounds=sizes.rounds, warmup=10)
        step(f"{name}: set_many")
        entries = [(f"batch{i % 16}", f"b{i:08d}", values[i % 256]) for i in range(sizes.batch)]
        batches = [entries[i : i + 50] for i in range(0, len(entries), 50)]
        if "FULL" in name:
            batches = batches[: max(2, len(batches) // 10)]
        t0 = time.perf_counter()
        for batch in batches:
            store.set_many(batch)
        many = sum(len(b) for b in batches) / (time.perf_counter() - t0)
        snap = _bench.interleave(
            [_bench.Op("snapshot", _snapshotter(store))],
            calls=min(calls, 200),
            rounds=1,
            warmup=2,
        )
        store.close()
        rows[name] = {
            "fsync": fsync,
            "set": _bench.latency_stats(samples["set"]),
            "get": _bench.latency_stats(samples["get"]),
            "set_ops_per_s": round(len(samples["set"]) / (sum(samples["set"]) / 1e9), 1),
            "get_ops_per_s": round(len(samples["get"]) / (sum(samples["get"]) / 1e9), 1),
            "set_many_50_entries_per_s": round(many, 1),
            "snapshot": _bench.latency_stats(snap["snapshot"]),
        }
    return rows, skipped


def _writer_rows(sizes: _Sizes, tmp: Path, step: Callable[[str], None]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    one: float | None = None
    for n in sizes.writers:
        step(f"{n} writer process(es)")
        got = _bench.parallel_writers(tmp / f"writers-{n}.db", n, sizes.writes_per_process)
        if n == 1:
            one = got["ops_per_s"] or None
        scaling = got["ops_per_s"] / one if one else None
        got["scaling"] = round(scaling, 3) if scaling else None
        got["efficiency"] = round(scaling / n, 3) if scaling else None
        out.append(got)
    return out


def run_benchmark(size: str = "default", *, progress: bool = True) -> dict[str, Any]:
    """Run the store workloads in a throwaway directory; the result document."""
    sizes = _SIZES[size]
    disk_ok = _disk_store_class()[0] is not None
    total = 1 + (2 * 2 if disk_ok else 0) + 1 + (len(sizes.writers) if disk_ok else 0) + 1
    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="swarmstate-bench-") as tmp,
        _progress(total, progress) as bar,
    ):

        def step(text: str) -> None:
            bar.set_description(text)
            bar.update(1)

        stores, skipped = _store_rows(sizes, Path(tmp), step)
        writers = _writer_rows(sizes, Path(tmp), step) if disk_ok else []
        if not disk_ok:
            skipped["writers"] = skipped.get("DiskStore", "DiskStore unavailable")
        step("checkpointers: the runtime's calls")
        savers, why = _bench.saver_rows(
            Path(tmp),
            calls=sizes.saver_calls,
            lengths=list(sizes.saver_lengths),
            rounds=sizes.rounds,
        )
        skipped.update(why)
    settings = {"size": size, **sizes.__dict__}
    return {
        "schema": 1,
        "kind": "swarmstate benchmark",
        "environment": _bench.environment(settings),
        "stores": stores,
        "writers": writers,
        "savers": savers,
        "footprint": {**_bench.footprint(), "wall_s": round(time.perf_counter() - started, 2)},
        "skipped": skipped,
        "hint": LANGGRAPH_HINT,
    }


def format_report(doc: dict[str, Any]) -> str:
    """The human-readable table printed by ``swarmstate benchmark``."""
    env = doc["environment"]
    lines = [
        f"swarmstate {env['packages'].get('swarmstate')} · Python {env['python']} · "
        f"{env['platform']} · {env['cpu_count']} CPUs",
        "",
        f"{'store':<18}{'fsync':<26}{'set p50':>9}{'set p99':>9}{'get p50':>9}"
        f"{'set/s':>11}{'set_many/s':>12}{'snap p50':>10}",
    ]
    for name, row in doc["stores"].items():
        lines.append(
            f"{name:<18}{row['fsync']:<26}{row['set']['p50']:>7.1f}µs{row['set']['p99']:>7.1f}µs"
            f"{row['get']['p50']:>7.1f}µs{row['set_ops_per_s']:>11,.0f}"
            f"{row['set_many_50_entries_per_s']:>12,.0f}{row['snapshot']['p50']:>8.1f}µs"
        )
    if doc["writers"]:
        lines += [
            "",
            "writer processes on one DiskStore file (spawn, NORMAL):",
            f"{'processes':>10}{'total ops/s':>14}{'scaling':>9}{'efficiency':>12}{'errors':>8}",
        ]
        for w in doc["writers"]:
            scaling = "—" if w["scaling"] is None else f"{w['scaling']:.2f}x"
            eff = "—" if w["efficiency"] is None else f"{w['efficiency']:.0%}"
            lines.append(
                f"{w['processes']:>10}{w['ops_per_s']:>14,.0f}{scaling:>9}{eff:>12}{w['errors']:>8}"
            )
    lines += _saver_lines(doc["savers"])
    fp = doc["footprint"]
    lines += [
        "",
        f"footprint: max RSS {fp['max_rss_mb']} MB (writers {fp['children_max_rss_mb']} MB), "
        f"CPU {fp['cpu_user_s'] + fp['cpu_system_s']:.1f} s (+{fp['children_cpu_s']} s in "
        f"writers), wall {fp['wall_s']} s",
    ]
    for what, why in doc["skipped"].items():
        lines.append(f"skipped {what}: {why}")
    lines.append(doc["hint"])
    return "\n".join(lines)


def _saver_lines(savers: dict[str, Any]) -> list[str]:
    """The checkpointer table: p50 per call of each op, ours beside LangGraph's."""
    if not savers:
        return []
    first = next(iter(savers.values()))
    latest = sorted(int(key[len("latest_") :]) for key in first if key.startswith("latest_"))
    heads = ["put", "put_writes", *(f"latest@{n}" for n in latest), "list(10)"]
    keys = ["put", "put_writes", *(f"latest_{n}" for n in latest), "list10"]
    lines = [
        "",
        "checkpointers on LangGraph's call pattern (p50 per call; each group in the same rounds):",
        f"{'group/saver':<44}" + "".join(f"{h:>12}" for h in heads),
    ]
    for name, row in savers.items():
        lines.append(f"{name:<44}" + "".join(f"{row[k]['p50']:>10.1f}µs" for k in keys))
    return lines


def check_writable(path: Path) -> None:
    """Refuse, before any work, an ``--out`` path the result could not be written to.

    Writes nothing at ``path``: a probe file is created beside it and removed.
    """
    if path.is_dir():
        raise StorageError(f"--out {path} is a directory; give a file path")
    parent = path.absolute().parent
    if not parent.is_dir():
        raise StorageError(f"--out {path}: directory {parent} does not exist; create it first")
    try:
        with tempfile.NamedTemporaryFile(dir=parent, prefix=".swarmstate-probe-"):
            pass
    except OSError as exc:
        raise StorageError(f"--out {path}: cannot write in {parent} ({exc.strerror})") from exc
    if path.exists() and not os.access(path, os.W_OK):
        raise StorageError(f"--out {path} exists and is not writable")


def write_result(doc: dict[str, Any], path: Path) -> None:
    """Write the result document to ``path`` whole: a temporary file, then a rename."""
    parent = path.absolute().parent
    fd, tmp = tempfile.mkstemp(dir=parent, prefix=".swarmstate-result-", suffix=".json")
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # an ordinary file, not mkstemp's 0600
        with os.fdopen(fd, "w") as handle:
            handle.write(json.dumps(doc, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
