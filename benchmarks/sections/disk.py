"""Section "disk": DiskStore snapshots, restore/diff, the write floor, several writers."""

from __future__ import annotations

import importlib.util
import statistics
from pathlib import Path
from typing import Any

import swarmstate
from benchmarks.harness.config import Config
from benchmarks.harness.data import bare_apsw, blob_value, gen_entries, pick_changes
from benchmarks.harness.results import Results
from swarmstate._bench import Op, interleave_rounds, parallel_writers, round_stats


def _disk_store_available() -> bool:
    try:
        return importlib.util.find_spec("swarmstate.backends.disk") is not None
    except ImportError:
        return False


def _open(path: Path, synchronous: str = "NORMAL") -> Any:
    from swarmstate.backends.disk import DiskStore

    return DiskStore(path, synchronous=synchronous)


def _fill(store: Any, entries: list[tuple[str, str, Any]]) -> None:
    for start in range(0, len(entries), 2_000):
        store.set_many(entries[start : start + 2_000])


def _snapshot_restore_diff(cfg: Config, res: Results, workdir: Path) -> None:
    rng = cfg.rng("disk.snapshot")
    stores: dict[int, Any] = {}
    entries_of: dict[int, list[tuple[str, str, Any]]] = {}
    for n in cfg.disk_sizes:
        entries = gen_entries(rng, max(1, n // 10), 10)
        store = _open(workdir / f"snap-{n}.db")
        _fill(store, entries)
        stores[n], entries_of[n] = store, entries
    ops = [Op(str(n), lambda i, s=s: s.snapshot()) for n, s in stores.items()]
    samples = interleave_rounds(
        ops, calls=cfg.few_calls(cfg.iters), rounds=cfg.rounds, warmup=cfg.warmup
    )
    for n in cfg.disk_sizes:
        res.add(
            f"disk.snapshot.{n}",
            round_stats(samples[str(n)]),
            section="disk",
            group="snapshot",
            subject="DiskStore.snapshot() (NORMAL)",
            param=n,
            batch="disk.snapshot",
        )

    diff_ops: list[Op] = []
    restore_ops: list[Op] = []
    for n, store in stores.items():
        entries = entries_of[n]
        for k in cfg.disk_changes:
            base = store.snapshot()
            store.set_many(pick_changes(rng, entries, k, 0))
            later = store.snapshot()
            diff_ops.append(Op(f"{k}.{n}", lambda i, a=base, b=later: b.diff(a)))
            # Each restore call first re-applies k fresh changes (untimed), so
            # every timed restore undoes exactly k changes.
            batches = [pick_changes(rng, entries, k, r + 1) for r in range(8)]
            restore_ops.append(
                Op(
                    f"{k}.{n}",
                    call=lambda i, s=store, a=base: s.restore(a),
                    setup=lambda i, s=store, b=batches: s.set_many(b[i % 8]),
                )
            )
    samples = interleave_rounds(
        diff_ops, calls=cfg.few_calls(cfg.iters), rounds=cfg.rounds, warmup=cfg.warmup
    )
    calls = cfg.few_calls(cfg.iters // 10)
    restored = interleave_rounds(restore_ops, calls=calls, rounds=cfg.rounds, warmup=5)
    for n in cfg.disk_sizes:
        for k in cfg.disk_changes:
            meta = {"section": "disk", "param": n, "changes": k}
            res.add(
                f"disk.diff.{k}.{n}",
                round_stats(samples[f"{k}.{n}"]),
                group="diff",
                subject=f"Snapshot.diff after {k} changes",
                batch="disk.diff",
                **meta,
            )
            res.add(
                f"disk.restore.{k}.{n}",
                round_stats(restored[f"{k}.{n}"]),
                group="restore",
                subject=f"DiskStore.restore after {k} changes",
                batch="disk.restore",
                **meta,
            )
    for store in stores.values():
        store.close()
    _restore_floor(cfg, res, workdir, entries_of)


def _restore_floor(
    cfg: Config, res: Results, workdir: Path, entries_of: dict[int, list[tuple[str, str, Any]]]
) -> None:
    """The write pattern of a restore done bare: k random keys rewritten in one transaction.

    Same keys and value sizes as the restore rows, in a one-table apsw file
    (WAL, NORMAL) per size. How this grows from 1,000 to 100,000 entries is
    what SQLite itself costs for writes scattered over a larger file.
    """
    import apsw

    rng = cfg.rng("disk.restore_floor")
    ops: list[Op] = []
    for n, entries in entries_of.items():
        conn = bare_apsw(workdir / f"restore-floor-{n}.db", "NORMAL")
        conn.execute("BEGIN")
        for start in range(0, len(entries), 2_000):
            conn.executemany(
                "INSERT OR REPLACE INTO kv VALUES (?, ?, ?)",
                [
                    (ns, key, swarmstate.dumps(value))
                    for ns, key, value in entries[start : start + 2_000]
                ],
            )
        conn.execute("COMMIT")
        for k in cfg.disk_changes:
            batches = [
                [(swarmstate.dumps(v), ns, key) for ns, key, v in pick_changes(rng, entries, k, r)]
                for r in range(8)
            ]

            def rewrite(i: int, c: apsw.Connection = conn, b: list[Any] = batches) -> None:
                c.execute("BEGIN IMMEDIATE")
                c.executemany("UPDATE kv SET value = ? WHERE ns = ? AND key = ?", b[i % 8])
                c.execute("COMMIT")

            ops.append(Op(f"{k}.{n}", rewrite))
    calls = cfg.few_calls(cfg.iters // 10)
    samples = interleave_rounds(ops, calls=calls, rounds=cfg.rounds, warmup=5)
    for n in entries_of:
        for k in cfg.disk_changes:
            res.add(
                f"disk.restore.floor.{k}.{n}",
                round_stats(samples[f"{k}.{n}"]),
                batch="disk.restore_floor",
                section="disk",
                group="restore_floor",
                subject=f"bare apsw: {k} random keys rewritten in one transaction",
                fsync="WAL, synchronous=NORMAL",
                param=n,
                changes=k,
            )


def _write_floor(cfg: Config, res: Results, workdir: Path, have_disk: bool) -> None:
    rng = cfg.rng("disk.floor")
    blobs = [blob_value(rng) for _ in range(16)]
    encoded = [swarmstate.dumps(b) for b in blobs]
    keys = [f"doc-{rng.getrandbits(32):08x}" for _ in range(256)]
    sql = "INSERT OR REPLACE INTO kv (ns, key, value) VALUES (?, ?, ?)"

    def pick(i: int) -> int:
        # Each revisit of a key brings different bytes, so no store can skip
        # the write as unchanged.
        return (i + i // 256) % 16

    for level in ("NORMAL", "FULL"):
        conn = bare_apsw(workdir / f"bare-{level}.db", level)
        ops = [
            Op("bare", lambda i, c=conn: c.execute(sql, ("docs", keys[i % 256], encoded[pick(i)])))
        ]
        if have_disk:
            store = _open(workdir / f"floor-{level}.db", level)
            ops.insert(
                0, Op("disk", lambda i, s=store: s.set("docs", keys[i % 256], blobs[pick(i)]))
            )
        calls = cfg.iters if level == "NORMAL" else cfg.few_calls(cfg.iters // 10)
        samples = interleave_rounds(ops, calls=calls, rounds=cfg.rounds, warmup=cfg.warmup)
        meta = {"section": "disk", "group": "write_floor", "param": level, "value_bytes": 10_240}
        meta["batch"] = f"disk.set10k.{level}"
        res.add(
            f"disk.set10k.bare.{level}",
            round_stats(samples["bare"]),
            subject=f"bare apsw INSERT OR REPLACE (WAL, {level})",
            **meta,
        )
        if have_disk:
            res.add(
                f"disk.set10k.DiskStore.{level}",
                round_stats(samples["disk"]),
                subject=f"DiskStore.set (WAL, {level})",
                **meta,
            )
            store.close()
        conn.close()


def _writers(cfg: Config, res: Results, workdir: Path) -> None:
    rates: dict[int, list[float]] = {n: [] for n in cfg.writer_counts}
    failures: list[str] = []
    errors = 0
    for r in range(cfg.writer_rounds):
        order = cfg.writer_counts if r % 2 == 0 else list(reversed(cfg.writer_counts))
        for n in order:
            out = parallel_writers(workdir / f"writers-{n}-{r}.db", n, cfg.writes_per_process)
            rates[n].append(out["ops_per_s"])
            failures += out["failures"]
            errors += out["errors"]
    one = statistics.median(rates[1]) if 1 in rates else None
    for n in cfg.writer_counts:
        median = statistics.median(rates[n])
        scaling = median / one if one else None
        res.add(
            f"disk.writers.{n}",
            {
                "unit": "ops/s",
                "median": round(median, 1),
                "rounds": rates[n],
                "scaling": round(scaling, 3) if scaling else None,
                "efficiency": round(scaling / n, 3) if scaling else None,
                "errors": errors,
                "failures": failures[:5],
            },
            section="disk",
            group="writers",
            subject="spawned writer processes on one file (NORMAL, ~230 B values)",
            param=n,
            writes_per_process=cfg.writes_per_process,
        )


def section_disk(cfg: Config, res: Results, workdir: Path) -> None:
    """DiskStore: every measurement needs swarmstate.backends.disk except the bare floor."""
    workdir.mkdir(parents=True, exist_ok=True)
    have_disk = _disk_store_available()
    if not have_disk:
        res.skipped["disk.DiskStore"] = "swarmstate.backends.disk does not exist yet"
    if have_disk:
        _snapshot_restore_diff(cfg, res, workdir)
    _write_floor(cfg, res, workdir, have_disk)
    if have_disk:
        _writers(cfg, res, workdir)
    small, big = min(cfg.disk_sizes), max(cfg.disk_sizes)
    res.claim(
        "disk.snapshot.flat",
        f"DiskStore snapshot, {big:,} entries / {small:,}",
        f"disk.snapshot.{big}",
        f"disk.snapshot.{small}",
        2.0,
    )
    for k in cfg.disk_changes:
        for op in ("restore", "diff"):
            changes = "1 change" if k == 1 else f"{k} changes"
            res.claim(
                f"disk.{op}.flat.{k}",
                f"DiskStore {op} after {changes}, {big:,} entries / {small:,}",
                f"disk.{op}.{k}.{big}",
                f"disk.{op}.{k}.{small}",
                2.0,
                floor=(f"disk.restore.floor.{k}.{big}", f"disk.restore.floor.{k}.{small}")
                if op == "restore"
                else None,
                floor_label=f"growth of DiskStore restore after {changes}, {small:,} to {big:,}",
            )
    res.claim(
        "disk.set10k.vs_bare",
        "10 kB write at NORMAL: DiskStore.set / a bare apsw INSERT OR REPLACE",
        "disk.set10k.DiskStore.NORMAL",
        "disk.set10k.bare.NORMAL",
        1.3,
    )
