"""Probe DiskStore's cost limits from issue 3 and write one results file.

Measures, in one run on one machine:

* ``snapshot()`` on a 1,000- and a 100,000-entry store;
* ``diff`` and ``restore`` after k = 1 and k = 100 changes on both sizes;
* ``set`` of a 10 kB value at synchronous=NORMAL next to a bare apsw
  ``INSERT OR REPLACE`` of the same bytes into a plain key/value table in a
  file with the same settings (WAL, NORMAL), calls interleaved so drift on a
  shared machine hits both sides alike.

Per-call times (perf_counter_ns), warm-up excluded, reported as percentiles;
ratios use medians. Seeded. Usage::

    python benchmarks/disk_probe.py [--quick] [--seed N] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw

import swarmstate as ss
from swarmstate.backends.disk import DiskStore

SIZES = (1_000, 100_000)
CHANGES = (1, 100)


def percentiles(samples_ns: list[int]) -> dict[str, float]:
    """p50/p90/p99 and mean in microseconds."""
    ordered = sorted(samples_ns)

    def pick(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))] / 1000

    return {
        "p50_us": pick(0.50),
        "p90_us": pick(0.90),
        "p99_us": pick(0.99),
        "mean_us": statistics.fmean(ordered) / 1000,
        "n": len(ordered),
    }


def timed(fn: Callable[[], Any]) -> int:
    start = time.perf_counter_ns()
    fn()
    return time.perf_counter_ns() - start


def filled_store(path: Path, size: int, rng: random.Random, **kwargs: Any) -> DiskStore:
    store = DiskStore(path, **kwargs)
    batch = [
        (f"thread-{i % 100}", f"key-{i:07d}", {"n": i, "blob": rng.randbytes(64)})
        for i in range(size)
    ]
    for start in range(0, size, 10_000):
        store.set_many(batch[start : start + 10_000])
    return store


def probe_snapshot(tmp: Path, size: int, rounds: int, rng: random.Random) -> dict[str, Any]:
    """snapshot() cost, with one untimed write between snapshots (as in real use)."""
    out: dict[str, Any] = {}
    for label, history in (("keep_all", None), ("max_history_8", 8)):
        store = filled_store(tmp / f"snap-{size}-{label}.db", size, rng, max_history=history)
        samples = []
        for i in range(rounds + rounds // 10):
            store.set("thread-0", f"key-{rng.randrange(size):07d}", i)
            elapsed = timed(store.snapshot)
            if i >= rounds // 10:
                samples.append(elapsed)
        store.close()
        out[label] = percentiles(samples)
    return out


def probe_diff_restore(
    tmp: Path, size: int, k: int, rounds: int, rng: random.Random
) -> dict[str, Any]:
    """diff(base) and restore(base) after k changes since base."""
    store = filled_store(tmp / f"dr-{size}-{k}.db", size, rng, max_history=8)
    diffs, restores = [], []
    warm = max(2, rounds // 10)
    for i in range(rounds + warm):
        base = store.snapshot()
        for j in range(k):
            if j % 10 == 9:
                store.delete("thread-1", f"key-{rng.randrange(size):07d}")
            else:
                store.set(f"thread-{j % 100}", f"key-{rng.randrange(size):07d}", [i, j])
        later = store.snapshot()
        d = timed(lambda: later.diff(base))  # noqa: B023 - called right here
        r = timed(lambda: store.restore(base))  # noqa: B023
        if i >= warm:
            diffs.append(d)
            restores.append(r)
    store.close()
    return {"diff": percentiles(diffs), "restore": percentiles(restores)}


BARE_TABLES = {
    "rowid": "CREATE TABLE kv (ns TEXT NOT NULL, key TEXT NOT NULL, value BLOB,"
    " PRIMARY KEY (ns, key))",
    "without_rowid": "CREATE TABLE kv (ns TEXT NOT NULL, key TEXT NOT NULL, value BLOB,"
    " PRIMARY KEY (ns, key)) WITHOUT ROWID",
}


def bare_connection(path: Path, table: str) -> apsw.Connection:
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = NORMAL")
    conn.set_busy_timeout(30_000)
    conn.execute(BARE_TABLES[table])
    return conn


def probe_set(tmp: Path, calls: int, rng: random.Random) -> dict[str, Any]:
    """DiskStore.set of 10 kB vs bare INSERT OR REPLACE, interleaved call by call."""
    values = [rng.randbytes(10_000) for _ in range(32)]
    encoded = [ss.dumps(v) for v in values]
    out: dict[str, Any] = {}
    for scenario, keyspace in (("overwrite_100_keys", 100), ("new_keys", None)):
        store = DiskStore(tmp / f"set-{scenario}.db", synchronous="NORMAL")
        bares = {t: bare_connection(tmp / f"bare-{scenario}-{t}.db", t) for t in BARE_TABLES}
        ours: list[int] = []
        theirs: dict[str, list[int]] = {t: [] for t in BARE_TABLES}
        warm = calls // 10
        for i in range(calls + warm):
            key = f"key-{i % keyspace if keyspace else i:07d}"
            v = i % len(values)
            elapsed = timed(lambda: store.set("thread", key, values[v]))  # noqa: B023
            bare_times = {}
            for table, conn in bares.items():
                bare_times[table] = timed(
                    lambda: conn.execute(  # noqa: B023
                        "INSERT OR REPLACE INTO kv VALUES (?, ?, ?)",
                        ("thread", key, encoded[v]),  # noqa: B023
                    )
                )
            if i >= warm:
                ours.append(elapsed)
                for table, t in bare_times.items():
                    theirs[table].append(t)
        result: dict[str, Any] = {"diskstore_set": percentiles(ours)}
        for table, samples in theirs.items():
            result[f"bare_{table}"] = percentiles(samples)
            result[f"ratio_vs_{table}_p50"] = (
                result["diskstore_set"]["p50_us"] / result[f"bare_{table}"]["p50_us"]
            )
        store.close()
        for conn in bares.values():
            conn.close()
        out[scenario] = result

    # The first write to a key after a snapshot keeps the old row: two statements.
    store = DiskStore(tmp / "set-after-snapshot.db", synchronous="NORMAL")
    store.set_many([("thread", f"key-{i:07d}", values[0]) for i in range(calls)])
    samples = []
    store.snapshot()
    for i in range(calls):
        samples.append(timed(lambda: store.set("thread", f"key-{i:07d}", values[1])))  # noqa: B023
    store.close()
    out["first_write_after_snapshot"] = {"diskstore_set": percentiles(samples[calls // 10 :])}
    return out


def environment() -> dict[str, Any]:
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpus": os.cpu_count(),
        "sqlite": apsw.sqlite_lib_version(),
        "apsw": apsw.apsw_version(),
        "swarmstate": ss.__version__,
        "when": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1234)
    parser.add_argument("--quick", action="store_true", help="fewer rounds, for a smoke run")
    parser.add_argument(
        "--out", type=Path, default=Path(__file__).parent / "results" / "disk_probe.json"
    )
    args = parser.parse_args()
    rng = random.Random(args.seed)
    rounds = 30 if args.quick else 200
    set_calls = 500 if args.quick else 3000
    results: dict[str, Any] = {"environment": environment(), "seed": args.seed}
    with tempfile.TemporaryDirectory(prefix="disk_probe") as tmpdir:
        tmp = Path(tmpdir)
        results["snapshot"] = {str(n): probe_snapshot(tmp, n, rounds, rng) for n in SIZES}
        results["diff_restore"] = {
            f"{n}_entries_k{k}": probe_diff_restore(tmp, n, k, max(10, rounds // 4), rng)
            for n in SIZES
            for k in CHANGES
        }
        results["set_10kB"] = probe_set(tmp, set_calls, rng)
    small, large = str(SIZES[0]), str(SIZES[1])
    ratios: dict[str, float] = {}
    for label in ("keep_all", "max_history_8"):
        ratios[f"snapshot_{label}_100k_over_1k"] = (
            results["snapshot"][large][label]["p50_us"]
            / results["snapshot"][small][label]["p50_us"]
        )
    for k in CHANGES:
        for op in ("diff", "restore"):
            ratios[f"{op}_k{k}_100k_over_1k"] = (
                results["diff_restore"][f"{large}_entries_k{k}"][op]["p50_us"]
                / results["diff_restore"][f"{small}_entries_k{k}"][op]["p50_us"]
            )
    for scenario in ("overwrite_100_keys", "new_keys"):
        for table in BARE_TABLES:
            ratios[f"set_{scenario}_vs_bare_{table}"] = results["set_10kB"][scenario][
                f"ratio_vs_{table}_p50"
            ]
    results["ratios_p50"] = ratios
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    for name, value in ratios.items():
        print(f"{name:45s} {value:6.2f}")
    print(f"results: {args.out}")


if __name__ == "__main__":
    main()
