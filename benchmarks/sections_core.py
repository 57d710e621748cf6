"""Section "core": the in-memory Store (issue 2 limits)."""

from __future__ import annotations

import copy
import gc
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _harness import Results, as_nested_dict, gen_entries, pick_changes, small_value

import swarmstate as ss
from swarmstate._bench import Op, interleave, latency_stats, throughput

if TYPE_CHECKING:
    from run import Config


def _snapshots(cfg: Config, res: Results) -> None:
    rng = cfg.rng("core.snapshot")
    stores: dict[int, ss.Store] = {}
    dicts: dict[int, dict[str, Any]] = {}
    for n in cfg.snapshot_sizes:
        entries = gen_entries(rng, max(1, n // 10), 10 if n >= 10 else n)
        store = ss.Store()
        store.set_many(entries)
        stores[n] = store
        dicts[n] = as_nested_dict(entries)
    ops = [Op(str(n), lambda i, s=s: s.snapshot()) for n, s in stores.items()]
    samples = interleave(ops, calls=cfg.iters, rounds=cfg.rounds, warmup=cfg.warmup)
    for n in cfg.snapshot_sizes:
        res.add(
            f"core.snapshot.Store.{n}",
            latency_stats(samples[str(n)]),
            section="core",
            group="snapshot",
            subject="Store.snapshot()",
            param=n,
        )
    # deepcopy is 5-6 orders of magnitude slower: fewer calls, same interleaving.
    calls = max(5, cfg.iters // 500)
    ops = [Op(str(n), lambda i, d=d: copy.deepcopy(d)) for n, d in dicts.items()]
    samples = interleave(ops, calls=calls, rounds=min(cfg.rounds, calls), warmup=1)
    for n in cfg.snapshot_sizes:
        res.add(
            f"core.snapshot.deepcopy.{n}",
            latency_stats(samples[str(n)]),
            section="core",
            group="snapshot",
            subject="copy.deepcopy(dict)",
            param=n,
        )
    res.limit(
        2,
        "snapshot at 100,000 entries / at 100",
        "core.snapshot.Store.100000",
        "core.snapshot.Store.100",
        2.0,
    )
    res.limit(
        2,
        "deepcopy of 50,000 entries / snapshot of 50,000",
        "core.snapshot.deepcopy.50000",
        "core.snapshot.Store.50000",
        10_000.0,
        op=">=",
    )


def _diffs(cfg: Config, res: Results) -> None:
    rng = cfg.rng("core.diff")
    ops: list[Op] = []
    for label, namespaces, per_ns in cfg.diff_layouts:
        entries = gen_entries(rng, namespaces, per_ns)
        store = ss.Store()
        for start in range(0, len(entries), 5_000):
            store.set_many(entries[start : start + 5_000])
        base = store.snapshot()
        store.set_many(pick_changes(rng, entries, 1, 1))
        one = store.snapshot()
        store.set_many(pick_changes(rng, entries, 100, 2))
        hundred = store.snapshot()
        targets = [(ns, key) for ns, key, _ in rng.sample(entries, 1_000)]
        values = [small_value(rng) for _ in range(1_000)]
        del entries
        ops += [
            Op(f"diff1.{label}", lambda i, a=base, b=one: b.diff(a)),
            Op(f"diff100.{label}", lambda i, a=one, b=hundred: b.diff(a)),
            Op(
                f"set.{label}",
                lambda i, s=store, t=targets, v=values: s.set(*t[i % 1_000], v[i % 1_000]),
            ),
        ]
    samples = interleave(ops, calls=cfg.iters, rounds=cfg.rounds, warmup=cfg.warmup)
    for label, namespaces, per_ns in cfg.diff_layouts:
        meta = {"section": "core", "param": label, "namespaces": namespaces, "keys_per_ns": per_ns}
        res.add(
            f"core.diff.1.{label}",
            latency_stats(samples[f"diff1.{label}"]),
            group="diff",
            subject="Snapshot.diff, 1 change",
            **meta,
        )
        res.add(
            f"core.diff.100.{label}",
            latency_stats(samples[f"diff100.{label}"]),
            group="diff",
            subject="Snapshot.diff, 100 changes",
            **meta,
        )
        res.add(
            f"core.set.{label}",
            latency_stats(samples[f"set.{label}"]),
            group="diff",
            subject="Store.set (small dict)",
            **meta,
        )
    del ops, samples
    gc.collect()
    res.limit(
        2,
        "diff of 1 change, 20,000 namespaces / 2,000",
        "core.diff.1.ns20000",
        "core.diff.1.ns2000",
        2.0,
    )
    res.limit(
        2,
        "diff of 1 change, one namespace of 100,000 keys / 1,000",
        "core.diff.1.one100000",
        "core.diff.1.one1000",
        2.0,
    )
    for label in ("ns20000", "one100000"):
        res.limit(
            2,
            f"diff of 1 change / one Store.set ({label})",
            f"core.diff.1.{label}",
            f"core.set.{label}",
            5.0,
        )


def _throughput(cfg: Config, res: Results) -> None:
    rng = cfg.rng("core.throughput")
    n = cfg.throughput_entries
    items = gen_entries(rng, 100, max(1, n // 100))
    dumps, loads = ss.dumps, ss.loads

    def store_run(_: int) -> int:
        store = ss.Store()
        set_, get = store.set, store.get
        for ns, key, value in items:
            set_(ns, key, value)
            get(ns, key)
        return len(items)

    def dict_run(_: int) -> int:
        plain: dict[tuple[str, str], bytes] = {}
        for ns, key, value in items:
            plain[(ns, key)] = dumps(value)
            loads(plain[(ns, key)])
        return len(items)

    def many_run(_: int) -> int:
        store = ss.Store()
        for start in range(0, len(items), 50):
            store.set_many(items[start : start + 50])
        return len(items)

    def single_run(_: int) -> int:
        store = ss.Store()
        for ns, key, value in items:
            store.set(ns, key, value)
        return len(items)

    got = throughput(
        {"store": store_run, "dict": dict_run, "set_many": many_run, "set": single_run},
        rounds=cfg.rounds + 2,
    )
    res.add(
        "core.setget.Store",
        got["store"],
        section="core",
        group="throughput",
        subject="Store.set + Store.get, small dict",
        param=len(items),
    )
    res.add(
        "core.setget.dict",
        got["dict"],
        section="core",
        group="throughput",
        subject="dict[(ns, key)] = dumps(v); loads(...)",
        param=len(items),
    )
    res.add(
        "core.set_many.50",
        got["set_many"],
        section="core",
        group="batch",
        subject="Store.set_many, batches of 50",
        param=len(items),
    )
    res.add(
        "core.set_many.single",
        got["set"],
        section="core",
        group="batch",
        subject="Store.set, one at a time",
        param=len(items),
    )
    res.limit(
        2,
        "set+get throughput / plain dict of codec bytes",
        "core.setget.Store",
        "core.setget.dict",
        0.5,
        metric="median",
        op=">=",
    )


def _threads(cfg: Config, res: Results) -> None:
    rng = cfg.rng("core.threads")
    n = cfg.throughput_entries
    lanes = max(cfg.thread_counts)
    # One namespace group per lane; a run with T threads gives each thread lanes/T groups.
    per_lane = [gen_entries(rng, 4, max(1, n // lanes // 4)) for _ in range(lanes)]

    def make(threads: int) -> Any:
        def run(_: int) -> int:
            store = ss.Store()
            work = [[e for lane in per_lane[t::threads] for e in lane] for t in range(threads)]
            gate = threading.Barrier(threads + 1)

            def body(chunk: list[tuple[str, str, Any]]) -> None:
                set_, get = store.set, store.get
                gate.wait()
                for ns, key, value in chunk:
                    set_(ns, key, value)
                    get(ns, key)

            workers = [threading.Thread(target=body, args=(w,)) for w in work]
            for w in workers:
                w.start()
            gate.wait()
            for w in workers:
                w.join()
            return sum(len(w) for w in work)

        return run

    got = throughput({str(t): make(t) for t in cfg.thread_counts}, rounds=cfg.rounds + 2)
    for t in cfg.thread_counts:
        res.add(
            f"core.threads.{t}",
            got[str(t)],
            section="core",
            group="threads",
            subject="Store set+get, distinct namespaces",
            param=t,
        )
    res.limit(
        2,
        "set+get throughput, 4 threads / 1 thread",
        "core.threads.4",
        "core.threads.1",
        0.8,
        metric="median",
        op=">=",
    )


class _DirtyMarks:
    """The minimal shape of the in-memory write path: a dict of bytes plus dirty marks.

    With ``lock`` each write takes one shared lock for its two assignments (what a
    lock around the publish step costs); without, it relies on each assignment
    being atomic, as ``Store.set`` does.
    """

    def __init__(self, lock: bool) -> None:
        self.flat: dict[tuple[str, str], bytes] = {}
        self.dirty: dict[tuple[str, str], None] = {}
        self.lock = threading.Lock() if lock else None

    def set(self, ns: str, key: str, value: Any) -> None:
        data, k = ss.dumps(value), (ns, key)
        if self.lock is None:
            self.flat[k] = data
            self.dirty[k] = None
            return
        with self.lock:
            self.flat[k] = data
            self.dirty[k] = None

    def get(self, ns: str, key: str) -> Any:
        return ss.loads(self.flat[(ns, key)])


def _design(cfg: Config, res: Results) -> None:
    """The measurements docs/architecture.md gives as reasons for the design."""
    rng = cfg.rng("core.design")
    entries = gen_entries(rng, 100, 100)
    store = ss.Store()
    store.set_many(entries)
    base = store.snapshot()
    ns, key, _ = entries[len(entries) // 2]
    store.set(ns, key, {"changed": True})
    later = store.snapshot()
    ops = [Op("trie", lambda i: later.diff(base))]
    try:
        import pyrsistent
    except ImportError:  # the bench extra installs it; without it the row is skipped
        pyrsistent = None
    if pyrsistent is not None:
        before = pyrsistent.pmap({(n, k): ss.dumps(v) for n, k, v in entries})
        after = before.set((ns, key), ss.dumps({"changed": True}))
        slots = pyrsistent.pvector(range(32))
        ops.append(Op("pmap", lambda i: before == after))
        ops.append(Op("pvector", lambda i: slots.set(5, i)))
    plain = list(range(32))

    def list_copy(i: int) -> object:
        copy_ = list(plain)
        copy_[5] = i
        return copy_

    ops.append(Op("list", list_copy))
    samples = interleave(ops, calls=max(50, cfg.iters // 10), rounds=cfg.rounds, warmup=5)
    rows = {
        "trie": ("design.diff1.trie.10000", "Snapshot.diff, 1 change in 10,000 entries"),
        "pmap": ("design.diff1.pmap_eq.10000", "pyrsistent PMap ==, 1 change in 10,000"),
        "pvector": ("design.node.pvector_set.32", "pyrsistent PVector.set on 32 slots"),
        "list": ("design.node.list_copy.32", "copy a 32-slot list and set one slot"),
    }
    for name, (row, subject) in rows.items():
        if name in samples:
            res.add(row, latency_stats(samples[name]), section="core", group="design",
                    subject=subject)  # fmt: skip

    per_thread = max(5_000, cfg.throughput_entries)  # long enough for GIL switches to matter
    lanes = [gen_entries(rng, 1, per_thread) for _ in range(4)]

    def make(lock: bool, threads: int) -> Any:
        def run(_: int) -> int:
            marks = _DirtyMarks(lock)
            gate = threading.Barrier(threads + 1)

            def body(chunk: list[tuple[str, str, Any]]) -> None:
                gate.wait()
                for n, k, v in chunk:
                    marks.set(n, k, v)
                    marks.get(n, k)

            workers = [threading.Thread(target=body, args=(lanes[t],)) for t in range(threads)]
            for w in workers:
                w.start()
            gate.wait()
            for w in workers:
                w.join()
            return per_thread * threads

        return run

    runs = {f"{kind}.{t}": make(kind == "lock", t) for kind in ("lock", "nolock") for t in (1, 4)}
    got = throughput(runs, rounds=cfg.rounds)
    for name, figures in got.items():
        kind, threads = name.split(".")
        res.add(
            f"design.threads.{kind}.{threads}",
            figures,
            section="core",
            group="design",
            subject=f"dict+dirty-mark writes, {'one shared lock' if kind == 'lock' else 'no lock'}",
            param=int(threads),
        )


def section_core(cfg: Config, res: Results, workdir: Path) -> None:
    """Snapshot, diff, throughput, threads and set_many of the in-memory Store."""
    del workdir  # in memory only
    _snapshots(cfg, res)
    gc.collect()
    _diffs(cfg, res)
    gc.collect()
    _throughput(cfg, res)
    _threads(cfg, res)
    _design(cfg, res)
