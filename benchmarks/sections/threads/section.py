"""Section "threads": what thread-level calls cost as threads pile up in one store (issue #31).

Stores of 1,000, 10,000 and 100,000 threads (1,000 and 10,000 at
``--quick``), one file or schema per size and saver: ours on ``DiskStore``
NORMAL beside ``SqliteSaver`` NORMAL, ours on ``PostgresStore`` beside
``PostgresSaver`` (with ``--pg-dsn``). Each thread is three checkpoints of
the recorded conversation with their pending writes, written through the
saver's own ``put``/``put_writes`` (``stores``), ours and the peer
in alternating chunks of :data:`CHUNK` threads. Then, every size and both
savers of a store in the same interleaved rounds (order reversed each
round, a garbage collection before each round):

- ``first_put``: the puts of new threads' checkpoints in a filled store, a
  round's figure the median of :data:`FRESH` threads' puts;
- ``list10``: ``list(None, limit=10)``, the newest checkpoints of any thread
  (one call a round, :data:`LISTS` rounds);
- ``delete_thread``: one thread deleted a round, the same thread ids for
  ours and the peer (:data:`DELETES` rounds);
- ``retain``: ours, ``retain(older_than=1 day)`` with every thread younger
  (:data:`RETAINS` rounds);
- ``put_policy``: ours, ``put`` of a thread's next checkpoint by a saver
  with ``Retention(older_than=1 day)`` (its defaults otherwise: a sweep of
  the idlest threads every ``Retention.every`` puts of the saver) and by one
  without, on the same store, :data:`PROBE_CALLS` calls a round, so the
  policy runs many times in each;
- ``cli``: ``swarmstate threads PATH --limit 20`` as a subprocess, three
  runs (skipped, with a note, while the command lacks ``--limit``);
- ``write``: seconds to write the threads (a round is a chunk), and
  ``bytes`` stored after.

A call predicted (from the same saver's calls at the smaller sizes) to
take longer than a budget (:data:`BUDGET`, :data:`BUDGET_QUICK` at
``--quick``) is not made; its rows are left out and the claims on them say
why (``rounds``). A round in which a call took longer than the
budget is the last.

PostgreSQL tables are analyzed after writing, before measuring; the
threads are written with ``synchronous_commit=off`` there (see
``stores``), the measured calls run with the server's settings.

Claims (issue #31's Done-when, at the run's largest size): ``delete_thread``
and ``list(None, limit=10)`` at most 1.0x the peer and within 1.5x of their
own cost at 1,000 threads; ``retain`` within 2x of its cost at 1,000; the put
with a policy within 1.1x of the put without; ``swarmstate threads --limit
20`` under a second; and (the issue's build list) a new thread's puts at
most 1.0x the peer's.

Run alone: ``python -m benchmarks.sections.threads.section --sizes 1000,10000 [--pg-dsn ...]``.
"""

import secrets
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.sections.threads.rounds import Budget, SaverAtSize, rounds
from benchmarks.sections.threads.stores import (
    KINDS,
    ONE_DAY,
    Chain,
    Opened,
    Population,
    ThreadWriter,
    populations,
    thread_ids,
)
from swarmstate._bench import Op, interleave_rounds, latency_stats, round_stats

__all__ = ["cli_takes_limit", "section_threads"]

Key = tuple[str, int]  # (saver, threads)

CHUNK = 250
FRESH = 5  # new threads per round of first puts
FRESH_ROUNDS = 20
LISTS = 5
DELETES = 20
RETAINS = 3
CLI_RUNS = 3
BUDGET = 120.0  # seconds: a call predicted to take longer is not made (rounds)
BUDGET_QUICK = 30.0
PROBE_CALLS = 768  # puts a round with the policy on and off (it sweeps every few)
SIZES = (1_000, 10_000, 100_000)
QUICK_SIZES = (1_000, 10_000)


def cli_takes_limit() -> bool:
    """Whether ``swarmstate threads`` has a ``--limit`` option yet."""
    got = subprocess.run(
        [sys.executable, "-m", "swarmstate", "threads", "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    return "--limit" in got.stdout


class Kind:
    """Every population of one store kind, and the rounds measured over them."""

    def __init__(self, kind: str, sizes: list[int], res: Any, log: Callable[[str], None]) -> None:
        self.kind = kind
        self.sizes = sizes
        self.res = res
        self.log = log
        self.ours, self.peer = KINDS[kind]

    def row(
        self, what: str, saver: str, n: int | None, figures: dict[str, Any], **meta: Any
    ) -> None:
        suffix = "" if n is None else f".{n}"
        self.res.add(
            f"threads.{self.kind}.{what}.{saver}{suffix}",
            figures,
            section="threads",
            group=what,
            subject=saver,
            param=n,
            store=self.kind,
            **meta,
        )


def build(
    kind: Kind, pops: list[Population], ids: list[str], writer: ThreadWriter
) -> dict[str, list[float]]:
    """Write the threads into each population, chunk by chunk alternating; seconds per chunk."""
    opened = [pop.writer() for pop in pops]
    chunks: dict[str, list[float]] = {pop.name: [] for pop in pops}
    tenth = max(1, len(ids) // CHUNK // 10)
    try:
        for c, start in enumerate(range(0, len(ids), CHUNK)):
            chunk = ids[start : start + CHUNK]
            order = range(len(pops)) if c % 2 == 0 else reversed(range(len(pops)))
            for i in order:
                saver = opened[i].saver
                begin = time.perf_counter()
                for thread_id in chunk:
                    writer.thread(saver, thread_id)
                chunks[pops[i].name].append(time.perf_counter() - begin)
            if (c + 1) % tenth == 0:
                done = start + len(chunk)
                kind.log(f"   threads {kind.kind}: {done:,}/{len(ids):,} threads written")
    finally:
        for one in opened:
            one.close()
    return chunks


def _stats(samples_ns: list[int]) -> dict[str, Any]:
    return {**latency_stats(samples_ns), "rounds_p50": [round(t / 1e3, 2) for t in samples_ns]}


def measure_kind(kind: Kind, cfg: Any, workdir: Path, writer: ThreadWriter, cli: bool) -> None:
    """Write, then measure, every size of one store kind; rows into ``kind.res``."""
    tag = f"threads_{secrets.token_hex(4)}"
    pops = {n: populations(kind.kind, n, workdir, cfg.pg_dsn, tag) for n in kind.sizes}
    ids = {n: thread_ids(cfg.rng(f"threads.{n}"), n) for n in kind.sizes}
    opened: dict[tuple[str, int], Opened] = {}
    try:
        for n in kind.sizes:
            began = time.perf_counter()
            chunks = build(kind, pops[n], ids[n], writer)
            took = time.perf_counter() - began
            kind.log(f"   threads {kind.kind}: {n:,} threads written in {took:.1f} s")
            for name, seconds in chunks.items():
                total = sum(seconds)
                kind.row(
                    "write",
                    name,
                    n,
                    {
                        "unit": "s",
                        "p50": round(total, 3),
                        "threads_per_s": round(n / total, 1),
                        "rounds_p50": [round(s, 4) for s in seconds],
                    },
                    batch=f"threads.{kind.kind}.write.{n}",
                    chunk=CHUNK,
                    statistic="seconds to write every thread (a round: one chunk)",
                    setup="synchronous_commit=off while writing" if kind.kind == "postgres" else "",
                )
            for pop in pops[n]:
                if pop.analyze is not None:
                    pop.analyze()
                opened[(pop.name, n)] = pop.reader()
        _measure(kind, cfg, pops, ids, opened, writer, cli)
    finally:
        for one in opened.values():
            one.close()
        for group in pops.values():
            for pop in group:
                pop.drop()


def _measure(
    kind: Kind,
    cfg: Any,
    pops: dict[int, list[Population]],
    ids: dict[int, list[str]],
    opened: dict[tuple[str, int], Opened],
    writer: ThreadWriter,
    cli: bool,
) -> None:
    sizes = kind.sizes
    budget = Budget(BUDGET_QUICK if cfg.quick else BUDGET)
    rng = cfg.rng(f"threads.{kind.kind}.measure")

    def contenders(make: Callable[[Key], Callable[[int], object]], ours_only: bool = False) -> Any:
        savers = (kind.ours,) if ours_only else (kind.ours, kind.peer)
        return [SaverAtSize(s, n, make((s, n))) for n in sizes for s in savers]

    def add(what: str, got: dict[Key, list[int]], left_out: dict[Key, str], **meta: Any) -> None:
        for key, samples in got.items():
            kind.row(
                what, key[0], key[1], _stats(samples), batch=f"threads.{kind.kind}.{what}", **meta
            )
        for key, why in left_out.items():
            kind.res.skipped[f"threads.{kind.kind}.{what}.{key[0]}.{key[1]}"] = why
        kind.log(f"   threads {kind.kind}: {what} measured")

    # New threads' first puts in the filled stores: a round's figure is the
    # median of FRESH new threads' puts (three each).
    fresh = thread_ids(rng, FRESH * FRESH_ROUNDS)
    put_ns: dict[Key, list[int]] = {}
    per_round: dict[Key, list[float]] = {}

    def first_puts(key: Key) -> Callable[[int], object]:
        def call(r: int) -> None:
            mine: list[int] = []
            for thread_id in fresh[r * FRESH : (r + 1) * FRESH]:
                writer.thread(opened[key].saver, f"fresh-{thread_id}", mine)
            put_ns.setdefault(key, []).extend(mine)
            per_round.setdefault(key, []).append(statistics.median(mine) / 1e3)

        return call

    got, left_out = rounds("first_put", contenders(first_puts), FRESH_ROUNDS, budget)
    for key in got:
        stats = {**latency_stats(put_ns[key]), "rounds_p50": [round(v, 2) for v in per_round[key]]}
        kind.row(
            "first_put",
            key[0],
            key[1],
            stats,
            batch=f"threads.{kind.kind}.first_put",
            threads_per_round=FRESH,
        )
    for key, why in left_out.items():
        kind.res.skipped[f"threads.{kind.kind}.first_put.{key[0]}.{key[1]}"] = why
    kind.log(f"   threads {kind.kind}: first_put measured")

    def lister(key: Key) -> Callable[[int], object]:
        saver = opened[key].saver
        return lambda r: list(saver.list(None, limit=10))

    add("list10", *rounds("list10", contenders(lister), min(cfg.rounds, LISTS), budget))

    doomed = {n: rng.sample(ids[n], DELETES) for n in sizes}

    def deleter(key: Key) -> Callable[[int], object]:
        saver, victims = opened[key].saver, doomed[key[1]]
        return lambda r: saver.delete_thread(victims[r])

    add("delete_thread", *rounds("delete_thread", contenders(deleter), DELETES, budget))

    reports: dict[int, Any] = {}

    def retainer(key: Key) -> Callable[[int], object]:
        saver = opened[key].saver

        def call(r: int) -> None:
            reports[key[1]] = saver.retain(older_than=ONE_DAY)

        return call

    got, left_out = rounds(
        "retain", contenders(retainer, ours_only=True), min(cfg.rounds, RETAINS), budget
    )
    for n, report in reports.items():
        assert report.threads_deleted == 0, f"retain deleted threads younger than a day at {n}"
    add("retain", got, left_out)
    _policy_puts(kind, cfg, opened, writer, budget)
    if cli:
        _cli(kind, pops)
    for n in sizes:
        for pop in pops[n]:
            figure = pop.stored_bytes()
            kind.row(
                "bytes",
                pop.name,
                n,
                {"unit": "bytes", "p50": figure, "rounds_p50": [figure]},
                batch=f"threads.{kind.kind}.bytes",
            )


def _policy_puts(
    kind: Kind, cfg: Any, opened: dict[Key, Opened], writer: ThreadWriter, budget: Budget
) -> None:
    """Ours' ``put`` with ``Retention(older_than=1 day)`` and without, same store, same rounds.

    The policy's sweep examines threads as ``retain`` does: a size where
    ``retain`` was left out, or took longer than the budget, is left out too.
    """
    from swarmstate._bench.conversation import Replay

    calls = PROBE_CALLS
    ops = []
    wanted = []
    for n in kind.sizes:
        why = budget.refuses("put_policy", kind.ours, n)
        retain = budget.seen.get(("retain", kind.ours), {}).get(n)
        if why is None and (retain is None or retain > budget.seconds):
            why = (
                "not measured: the policy's sweep examines threads as retain() does, and "
                + (
                    "retain() was not measured"
                    if retain is None
                    else f"retain() took {retain:,.0f} s"
                )
                + f" at {n:,} threads, over the {budget.seconds:g} s budget per call"
            )
        if why is not None:
            for label in ("on", "off"):
                kind.res.skipped[f"threads.{kind.kind}.put_policy_{label}.{kind.ours}.{n}"] = why
            continue
        wanted.append(n)
        one = opened[(kind.ours, n)]
        for label, saver in (("on", one.with_policy), ("off", one.saver)):
            chain = Chain(Replay(writer.conversation, saver, f"probe-{label}"))
            args: list[Any] = []
            saver.put(*chain.put_args(0))

            def setup(i: int, chain: Any = chain, args: list[Any] = args) -> None:
                args[:] = chain.put_args(i + 1)

            ops.append(Op(f"{label}|{n}", lambda i, s=saver, a=args: s.put(*a), setup))
    if not ops:
        return
    got = interleave_rounds(ops, calls=calls, rounds=min(cfg.rounds, 24), warmup=20)
    for n in wanted:
        for label in ("on", "off"):
            samples = got[f"{label}|{n}"]
            longest = max(t for part in samples for t in part)
            budget.note("put_policy", kind.ours, n, longest / 1e9)
            stats = round_stats(samples)
            stats["max"] = round(longest / 1e3, 2)
            kind.row(
                f"put_policy_{label}",
                kind.ours,
                n,
                stats,
                batch=f"threads.{kind.kind}.put_policy",
                every=opened[(kind.ours, n)].with_policy.retention.every,
            )
    kind.log(f"   threads {kind.kind}: put with and without a Retention policy measured")


def _cli(kind: Kind, pops: dict[int, list[Population]]) -> None:
    """``swarmstate threads PATH --limit 20``, three runs per size, against a one-second budget."""
    runs: dict[int, list[int]] = {n: [] for n in kind.sizes}
    for _ in range(CLI_RUNS):
        for n in kind.sizes:
            ours = next(p for p in pops[n] if p.ours)
            command = [
                sys.executable,
                "-m",
                "swarmstate",
                "threads",
                *ours.cli_args,
                "--limit",
                "20",
            ]
            begin = time.perf_counter_ns()
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            runs[n].append(time.perf_counter_ns() - begin)
            if done.returncode != 0:
                raise RuntimeError(f"swarmstate threads failed: {done.stderr.strip()}")
    for n in kind.sizes:
        kind.row("cli", kind.ours, n, _stats(runs[n]), batch=f"threads.{kind.kind}.cli")
        kind.row(
            "cli",
            "budget",
            n,
            {"unit": "us", "p50": 1e6, "rounds_p50": [1e6] * CLI_RUNS},
            batch=f"threads.{kind.kind}.cli",
        )


# -- the section -----------------------------------------------------------------------


def section_threads(cfg: Any, res: Any, workdir: Path) -> None:
    """Rows ``threads.<store>.<what>.<saver>.<threads>`` and issue #31's claims."""
    run_threads(cfg, res, workdir, list(QUICK_SIZES if cfg.quick else SIZES))


def run_threads(cfg: Any, res: Any, workdir: Path, sizes: list[int]) -> None:
    """The section at the given sizes (the smallest is the base of the flatness claims)."""
    from swarmstate._bench.conversation import Conversation

    workdir.mkdir(parents=True, exist_ok=True)
    calls = PROBE_CALLS
    writer = ThreadWriter(Conversation.record(f"{cfg.seed}:threads", calls + 24))
    cli = cli_takes_limit()
    if not cli:
        res.skipped["threads.cli"] = (
            "`swarmstate threads` does not take --limit yet (issue #31): its rows and claim "
            "are left out of this run"
        )
    kinds = ["disk", "postgres"] if cfg.pg_dsn else ["disk"]
    if not cfg.pg_dsn:
        res.skipped["threads.postgres"] = "no --pg-dsn given (a PostgreSQL server to measure on)"
    log = lambda message: print(message, flush=True)  # noqa: E731
    for name in kinds:
        began = time.perf_counter()
        measure_kind(Kind(name, sizes, res, log), cfg, workdir, writer, cli)
        log(f"   threads {name}: {time.perf_counter() - began:.1f} s")
    thread_claims(res, sizes, pg=cfg.pg_dsn is not None, cli=cli)


def thread_claims(res: Any, sizes: list[int], pg: bool, cli: bool) -> None:
    """Issue #31's limits at the run's largest size, per store."""
    big, small = max(sizes), min(sizes)
    for kind, (ours, peer) in KINDS.items():
        where = "file" if kind == "disk" else "PostgreSQL"
        reason = None if kind == "disk" or pg else "needs --pg-dsn: a PostgreSQL server"
        row = f"threads.{kind}.%s.%s.%d"
        claims = []
        for what, call in (("delete_thread", "delete_thread"), ("list10", "list(None, limit=10)")):
            claims += [
                (
                    f"{what}.peer",
                    f"{call} p50 at {big:,} threads, {ours} / {peer}",
                    (what, ours, big),
                    (what, peer, big),
                    1.0,
                ),
                (
                    f"{what}.flat",
                    f"{call} p50, {ours} at {big:,} threads / at {small:,}",
                    (what, ours, big),
                    (what, ours, small),
                    1.5,
                ),
            ]
        claims += [
            (
                "retain.flat",
                f"retain(older_than=1 day) with nothing that old, {ours} at {big:,} threads "
                f"/ at {small:,}",
                ("retain", ours, big),
                ("retain", ours, small),
                2.0,
            ),
            (
                "put_policy",
                f"put p50 at {big:,} threads, {ours} with Retention(older_than=1 day) / without",
                ("put_policy_on", ours, big),
                ("put_policy_off", ours, big),
                1.1,
            ),
            (
                "first_put",
                f"a new thread's put p50 at {big:,} threads, {ours} / {peer}",
                ("first_put", ours, big),
                ("first_put", peer, big),
                1.0,
            ),
        ]
        if cli:
            claims.append(
                (
                    "cli",
                    f"`swarmstate threads PATH --limit 20` at {big:,} threads, time / 1 s",
                    ("cli", ours, big),
                    ("cli", "budget", big),
                    1.0,
                )
            )
        for cid, label, num, den, bound in claims:
            left_out = res.skipped.get(row % num) or res.skipped.get(row % den)
            res.claim(
                f"threads.{kind}.{cid}",
                f"{where}: {label}",
                row % num,
                row % den,
                bound,
                section="threads",
                reason=reason or left_out,
            )


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import tempfile

    from benchmarks.harness.config import Config
    from benchmarks.harness.results import Results

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    cfg = Config.make(None, args.seed, False, args.pg_dsn)
    res = Results()
    with tempfile.TemporaryDirectory(prefix="swarmstate-threads-") as tmp:
        run_threads(cfg, res, Path(tmp), [int(n) for n in args.sizes.split(",")])
    for claim in res.claims:
        ratio = (
            "not measured"
            if claim["ratio"] is None
            else f"{claim['ratio']:.3g} [{claim['q1']:.3g}-{claim['q3']:.3g}]"
        )
        print(f"{claim['label']}: {ratio} {claim['op']} {claim['bound']:g}")
    if args.out:
        args.out.write_text(json.dumps({"rows": res.rows, "claims": res.claims}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
