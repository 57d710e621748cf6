"""Section "core": the in-memory Store's snapshots, diffs, throughput and threads."""

from __future__ import annotations

import copy
import gc
import threading
from pathlib import Path
from typing import Any

import swarmstate
from benchmarks.harness.config import Config
from benchmarks.harness.data import as_nested_dict, gen_entries, pick_changes, small_value
from benchmarks.harness.results import Results
from swarmstate._bench import Op, interleave_rounds, round_stats, throughput


def _snapshots(cfg: Config, res: Results) -> None:
    rng = cfg.rng("core.snapshot")
    stores: dict[int, swarmstate.Store] = {}
    dicts: dict[int, dict[str, Any]] = {}
    for n in cfg.snapshot_sizes:
        entries = gen_entries(rng, max(1, n // 10), 10 if n >= 10 else n)
        store = swarmstate.Store()
        store.set_many(entries)
        stores[n] = store
        dicts[n] = as_nested_dict(entries)
    ops = [Op(f"snap.{n}", lambda i, s=s: s.snapshot()) for n, s in stores.items()]
    # deepcopy is 5-6 orders of magnitude slower: a few calls per round, same rounds.
    few = max(cfg.rounds, cfg.iters // 500)
    ops += [
        Op(f"deep.{n}", lambda i, d=d: copy.deepcopy(d), calls=few, warmup=1)
        for n, d in dicts.items()
    ]
    samples = interleave_rounds(
        ops, calls=cfg.few_calls(cfg.iters), rounds=cfg.rounds, warmup=cfg.warmup
    )
    for n in cfg.snapshot_sizes:
        for kind, subject in (("snap", "Store.snapshot()"), ("deep", "copy.deepcopy(dict)")):
            name = "Store" if kind == "snap" else "deepcopy"
            res.add(
                f"core.snapshot.{name}.{n}",
                round_stats(samples[f"{kind}.{n}"]),
                section="core",
                group="snapshot",
                subject=subject,
                param=n,
                batch="core.snapshot",
            )
    small, big, deep = min(cfg.snapshot_sizes), max(cfg.snapshot_sizes), cfg.deepcopy_size
    res.claim(
        "core.snapshot.flat",
        f"snapshot of {big:,} entries / of {small:,}",
        f"core.snapshot.Store.{big}",
        f"core.snapshot.Store.{small}",
        2.0,
    )
    res.claim(
        "core.snapshot.vs_deepcopy",
        f"copy.deepcopy of {deep:,} entries / Store.snapshot of {deep:,}",
        f"core.snapshot.deepcopy.{deep}",
        f"core.snapshot.Store.{deep}",
        10_000.0,
        op=">=",
    )


def _diffs(cfg: Config, res: Results) -> None:
    rng = cfg.rng("core.diff")
    ops: list[Op] = []
    layouts = cfg.diff_layouts()
    for label, namespaces, per_ns in layouts:
        entries = gen_entries(rng, namespaces, per_ns)
        store = swarmstate.Store()
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
    samples = interleave_rounds(
        ops, calls=cfg.few_calls(cfg.iters), rounds=cfg.rounds, warmup=cfg.warmup
    )
    for label, namespaces, per_ns in layouts:
        meta = {"section": "core", "param": label, "namespaces": namespaces, "keys_per_ns": per_ns}
        meta["batch"] = "core.diff"
        for kind, row, subject in (
            ("diff1", "diff.1", "Snapshot.diff, 1 change"),
            ("diff100", "diff.100", "Snapshot.diff, 100 changes"),
            ("set", "set", "Store.set (small dict)"),
        ):
            res.add(
                f"core.{row}.{label}",
                round_stats(samples[f"{kind}.{label}"]),
                group="diff",
                subject=subject,
                **meta,
            )
    del ops, samples
    gc.collect()
    (few, _, _), (many, n_many, _), (one, _, k_one), (big, _, k_big) = layouts
    res.claim(
        "core.diff.flat_namespaces",
        f"diff of 1 change, {n_many:,} namespaces / {cfg.diff_namespaces[0]:,}",
        f"core.diff.1.{many}",
        f"core.diff.1.{few}",
        2.0,
    )
    res.claim(
        "core.diff.flat_keys",
        f"diff of 1 change, one namespace of {k_big:,} keys / of {k_one:,}",
        f"core.diff.1.{big}",
        f"core.diff.1.{one}",
        2.0,
    )
    for label, what in ((many, f"{n_many:,} namespaces"), (big, f"one namespace of {k_big:,}")):
        res.claim(
            f"core.diff.vs_set.{label.rstrip('0123456789')}",
            f"diff of 1 change / one Store.set, {what}",
            f"core.diff.1.{label}",
            f"core.set.{label}",
            5.0,
        )


def _throughput(cfg: Config, res: Results) -> None:
    rng = cfg.rng("core.throughput")
    n = cfg.throughput_entries
    items = gen_entries(rng, 100, max(1, n // 100))
    dumps, loads = swarmstate.dumps, swarmstate.loads

    def store_run(_: int) -> int:
        store = swarmstate.Store()
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
        store = swarmstate.Store()
        for start in range(0, len(items), 50):
            store.set_many(items[start : start + 50])
        return len(items)

    def single_run(_: int) -> int:
        store = swarmstate.Store()
        for ns, key, value in items:
            store.set(ns, key, value)
        return len(items)

    got = throughput(
        {"store": store_run, "dict": dict_run, "set_many": many_run, "set": single_run},
        rounds=cfg.throughput_rounds,
    )
    meta = {"section": "core", "param": len(items), "batch": "core.throughput"}
    res.add(
        "core.setget.Store",
        got["store"],
        group="throughput",
        subject="Store.set + Store.get, small dict",
        **meta,
    )
    res.add(
        "core.setget.dict",
        got["dict"],
        group="throughput",
        subject="dict[(ns, key)] = dumps(v); loads(...)",
        **meta,
    )
    res.add(
        "core.set_many.50",
        got["set_many"],
        group="batch",
        subject="Store.set_many, batches of 50",
        **meta,
    )
    res.add(
        "core.set_many.single",
        got["set"],
        group="batch",
        subject="Store.set, one at a time",
        **meta,
    )
    res.claim(
        "core.throughput.vs_dict",
        "set+get ops/s: Store / a plain dict of codec bytes",
        "core.setget.Store",
        "core.setget.dict",
        0.5,
        op=">=",
        per_call=False,
    )


def _threads(cfg: Config, res: Results) -> None:
    rng = cfg.rng("core.threads")
    n = cfg.throughput_entries
    lanes = max(cfg.thread_counts)
    # One namespace group per lane; a run with T threads gives each thread lanes/T groups.
    per_lane = [gen_entries(rng, 4, max(1, n // lanes // 4)) for _ in range(lanes)]

    def make(threads: int) -> Any:
        def run(_: int) -> int:
            store = swarmstate.Store()
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

    got = throughput({str(t): make(t) for t in cfg.thread_counts}, rounds=cfg.throughput_rounds)
    for t in cfg.thread_counts:
        res.add(
            f"core.threads.{t}",
            got[str(t)],
            section="core",
            group="threads",
            subject="Store set+get, distinct namespaces",
            param=t,
            batch="core.threads",
        )
    res.claim(
        "core.threads.scaling",
        "set+get ops/s in total: 4 threads / 1 thread",
        "core.threads.4",
        "core.threads.1",
        0.8,
        op=">=",
        per_call=False,
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
        data, k = swarmstate.dumps(value), (ns, key)
        if self.lock is None:
            self.flat[k] = data
            self.dirty[k] = None
            return
        with self.lock:
            self.flat[k] = data
            self.dirty[k] = None

    def get(self, ns: str, key: str) -> Any:
        return swarmstate.loads(self.flat[(ns, key)])


def _design(cfg: Config, res: Results) -> None:
    """The measurements docs/architecture.md gives as reasons for the design."""
    rng = cfg.rng("core.design")
    entries = gen_entries(rng, 100, 100)
    store = swarmstate.Store()
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
        before = pyrsistent.pmap({(n, k): swarmstate.dumps(v) for n, k, v in entries})
        after = before.set((ns, key), swarmstate.dumps({"changed": True}))
        slots = pyrsistent.pvector(range(32))
        ops.append(Op("pmap", lambda i: before == after))
        ops.append(Op("pvector", lambda i: slots.set(5, i)))
    plain = list(range(32))

    def list_copy(i: int) -> object:
        copy_ = list(plain)
        copy_[5] = i
        return copy_

    ops.append(Op("list", list_copy))
    # No claim compares these rows: a few rounds are enough.
    rounds = min(cfg.rounds, 5)
    samples = interleave_rounds(ops, calls=max(50, cfg.iters // 10), rounds=rounds, warmup=5)
    rows = {
        "trie": ("design.diff1.trie.10000", "Snapshot.diff, 1 change in 10,000 entries"),
        "pmap": ("design.diff1.pmap_eq.10000", "pyrsistent PMap ==, 1 change in 10,000"),
        "pvector": ("design.node.pvector_set.32", "pyrsistent PVector.set on 32 slots"),
        "list": ("design.node.list_copy.32", "copy a 32-slot list and set one slot"),
    }
    for name, (row, subject) in rows.items():
        if name in samples:
            res.add(row, round_stats(samples[name]), section="core", group="design",
                    subject=subject, batch="core.design")  # fmt: skip

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
    got = throughput(runs, rounds=rounds)
    for name, figures in got.items():
        kind, threads = name.split(".")
        res.add(
            f"design.threads.{kind}.{threads}",
            figures,
            section="core",
            group="design",
            subject=f"dict+dirty-mark writes, {'one shared lock' if kind == 'lock' else 'no lock'}",
            param=int(threads),
            batch="core.design.threads",
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
