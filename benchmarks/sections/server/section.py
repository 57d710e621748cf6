"""Section "server": the load a server runs, ours beside the upstream async saver (#39).

One asyncio event loop runs everything. On it, ``users`` tasks (16 and 64)
each ``await graph.ainvoke(...)`` on a thread of their own, ``turns`` turns
each (20; 4 at ``--quick``), on a real LangGraph graph: the shapes
section's ``add_messages`` conversation (an input and three plain-Python
nodes, ``langchain_core`` messages, seeded non-repetitive text),
``durability="sync"``. A ticker task on the same loop sleeps a millisecond
at a time and records how late each wake-up is: the loop's lag, what every
other request of that server waits (:mod:`.load`).

Contenders (:mod:`.contenders`): on a file, ``SwarmStateSaver(DiskStore
NORMAL)`` and ``AsyncSqliteSaver`` at ``synchronous=NORMAL``; on
PostgreSQL (``--pg-dsn``), ``SwarmStateSaver(PostgresStore)`` and
``AsyncPostgresSaver`` on an ``AsyncConnectionPool``, both pools of the
same size (8). A round runs every store and concurrency, ours and its peer
one after the other, the order flipped from one run to the next and from
one round to the next; every run uses new threads, so each round does the
same work. Round 0 warms up (pools filled, tables created, code paths run)
and is dropped. A collection runs before each run, never inside one.

Rows ``server.<store>.u<users>.<metric>.<saver>``, one figure per round:
``throughput`` (turns/s: turns over the run's wall time), ``turn_p50`` and
``turn_p99`` (each ``ainvoke``, ms), ``lag_p50``, ``lag_p99`` and
``lag_max`` (the ticker's wake-ups, ms), ``loop_cpu`` (the loop thread's
CPU time per turn, ms: what a turn costs the loop, work handed to worker
threads left out) and ``loop_busy`` (that CPU time over the run's wall
time: near 1, the loop is saturated and every ready task waits for the
others' pieces, so the lag grows with throughput); and
``server.<store>.u<users>.lag_allowance.<peer>``: the peer's lag p99, or
1 ms where it is lower.

Claims (issue #39's limits), per store and concurrency, ours over the
peer: throughput >= 1.0, turn p99 <= 1.0, and the loop's lag p99 over the
allowance <= 2.0 (at most twice the peer's, or 2 ms where the peer's is
under 1 ms).

Open loop (``--open-load F``, run alone only): the warm-up round runs as
above and gives each store and concurrency its saturation, the slower
contender's turns per second; the measured rounds then offer both savers
the same load, ``F`` times that (``F`` below 1: under both savers'
saturation), as seeded Poisson arrivals, each turn timed from its arrival
(:mod:`.load`). Rows ``server.<store>.u<users>.open.<metric>.<saver>``
and ``server.<store>.u<users>.open.offered`` (turns/s); no claims (issue
#39's limits are set on the closed loop). It separates a loop busier
because turns end sooner from a loop held longer per turn: at the same
offered load, each saver's lag is its own pieces' length.

Run alone: ``python -m benchmarks.sections.server --users 16,64 --turns 20
[--pg-dsn ...] [--open-load 0.6]``.
"""

import asyncio
import gc
import statistics
import sys
import time
from collections.abc import Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.harness.results import Results, spread
from benchmarks.sections.server.contenders import PAIRS, open_contenders
from benchmarks.sections.server.load import Served, serve
from benchmarks.sections.shapes.graphs import make_shape
from swarmstate._bench import latency_stats

__all__ = ["METRICS", "ServerRun", "measure", "record", "section_server"]

SHAPE = "lc_grow"  # the shapes section's growing add_messages conversation
LAG_ALLOWANCE_MS = 1.0  # below this, the peer's lag counts as this much
# metric -> (unit, what it is, higher is better)
METRICS: dict[str, tuple[str, str, bool]] = {
    "throughput": ("turns/s", "turns per second", True),
    "turn_p50": ("ms", "turn (ainvoke) p50", False),
    "turn_p99": ("ms", "turn (ainvoke) p99", False),
    "lag_p50": ("ms", "event loop lag p50", False),
    "lag_p99": ("ms", "event loop lag p99", False),
    "lag_max": ("ms", "event loop lag max", False),
    "loop_cpu": ("ms", "the loop thread's CPU per turn", False),
    "loop_busy": ("share", "the loop thread's CPU over the run's wall time", False),
}


@dataclass
class ServerRun:
    """What one run of the section does."""

    users: tuple[int, ...] = (16, 64)
    turns: int = 20
    rounds: int = 5  # measured rounds, after one round of warm-up
    seed: int = 7
    pg_dsn: str | None = None
    pool_size: int = 8
    open_load: float | None = None  # offered load over saturation, for an open loop


@dataclass
class Measured:
    """Every measured round, and how each contender was opened."""

    served: dict[tuple[str, int, str], list[Served]]  # (store, users, saver) -> a run per round
    setups: dict[str, dict[str, Any]]  # saver -> how it was opened
    stores: list[str]
    offered: dict[tuple[str, int], float] = field(default_factory=dict)  # open loop: turns/s


def measure(run: ServerRun, tmp: Path, log: Callable[[str], None] = print) -> Measured:
    """Run the section's rounds on a new event loop."""
    return asyncio.run(_rounds(run, tmp, log))


async def _rounds(run: ServerRun, tmp: Path, log: Callable[[str], None]) -> Measured:
    shape = make_shape(SHAPE, run.seed, run.turns)
    served: dict[tuple[str, int, str], list[Served]] = {}
    warm: dict[tuple[str, int], float] = {}  # (store, users) -> the slower contender's turns/s
    async with AsyncExitStack() as stack:
        contenders = await open_contenders(stack, tmp, run.pg_dsn, run.pool_size)
        by_name = {c.name: c for c in contenders}
        graphs = {c.name: shape.build(c.checkpointer) for c in contenders}
        pairs = [(store, ours, peer) for store, ours, peer in PAIRS if ours in by_name]
        # What the process holds before the rounds stays out of their collections.
        gc.collect()
        gc.freeze()
        try:
            for round_no in range(run.rounds + 1):
                began = time.perf_counter()
                flip = round_no
                for store, ours, peer in pairs:
                    for users in run.users:
                        flip += 1
                        rate = None
                        if round_no and run.open_load is not None:
                            rate = run.open_load * warm[(store, users)]
                        for name in (ours, peer) if flip % 2 == 0 else (peer, ours):
                            gc.collect()
                            got = await serve(
                                graphs[name], shape.turn_input, users, run.turns,
                                f"r{round_no}-u{users}", rate=rate, seed=str(run.seed),
                            )  # fmt: skip
                            if round_no:
                                served.setdefault((store, users, name), []).append(got)
                            else:
                                slower = min(
                                    warm.get((store, users), got.throughput), got.throughput
                                )
                                warm[(store, users)] = slower
                what = "warm-up" if round_no == 0 else f"round {round_no}/{run.rounds}"
                log(f"   server {what}: {time.perf_counter() - began:.1f} s")
        finally:
            gc.unfreeze()
    offered = {key: run.open_load * rate for key, rate in warm.items()} if run.open_load else {}
    stores = [store for store, _, _ in pairs]
    return Measured(served, {c.name: c.setup for c in contenders}, stores, offered)


def _ms(samples_ns: list[int], key: str) -> float:
    return float(latency_stats(samples_ns)[key]) / 1e3


def round_figures(got: Served) -> dict[str, float]:
    """Every metric of one run."""
    return {
        "throughput": got.throughput,
        "turn_p50": _ms(got.turn_ns, "p50"),
        "turn_p99": _ms(got.turn_ns, "p99"),
        "lag_p50": _ms(got.lag_ns, "p50"),
        "lag_p99": _ms(got.lag_ns, "p99"),
        "lag_max": max(got.lag_ns) / 1e6,
        "loop_cpu": got.loop_cpu_per_turn,
        "loop_busy": got.loop_busy,
    }


def base_of(run: ServerRun, store: str, users: int) -> str:
    """The rows' prefix for a store and concurrency: ``.open`` after it for an open loop."""
    return f"server.{store}.u{users}" + ("" if run.open_load is None else ".open")


def record(run: ServerRun, measured: Measured, res: Results) -> None:
    """Rows ``server.<store>.u<users>[.open].<metric>.<saver>`` and, closed loop, the claims."""
    for (store, users), rate in measured.offered.items():
        res.add(
            f"{base_of(run, store, users)}.offered",
            {"unit": "turns/s", "median": round(rate, 4)},
            section="server", store=store, users=users, open_load=run.open_load,
            group="offered",
        )  # fmt: skip
    for (store, users, saver), runs in measured.served.items():
        per_round = [round_figures(got) for got in runs]
        base = base_of(run, store, users)
        meta = {
            "section": "server",
            "subject": saver,
            "param": users,
            "store": store,
            "users": users,
            "turns": run.turns,
            "durability": "sync",
            "arrivals": "closed loop" if run.open_load is None else "Poisson",
            "open_load": run.open_load,
            "loop": type(asyncio.get_event_loop_policy()).__name__,
            "setup": measured.setups[saver],
            "batch": base,
        }
        for metric, (unit, _, _) in METRICS.items():
            values = [figures[metric] for figures in per_round]
            res.add(
                f"{base}.{metric}.{saver}",
                {"unit": unit, "median": round(statistics.median(values), 4),
                 "rounds": [round(v, 4) for v in values]},
                group=metric,
                **meta,
            )  # fmt: skip
        res.rows[f"{base}.turn_p50.{saver}"]["turns_measured"] = sum(len(g.turn_ns) for g in runs)
        res.rows[f"{base}.lag_p99.{saver}"]["ticks_measured"] = sum(len(g.lag_ns) for g in runs)
        if not any(saver == ours for _, ours, _ in PAIRS):
            allowance = [max(figures["lag_p99"], LAG_ALLOWANCE_MS) for figures in per_round]
            res.add(
                f"{base}.lag_allowance.{saver}",
                {"unit": "ms", "median": round(statistics.median(allowance), 4),
                 "rounds": [round(v, 4) for v in allowance]},
                group="lag_allowance",
                **meta,
            )  # fmt: skip
    if run.open_load is None:
        claims(res, run, pg=run.pg_dsn is not None)


def claims(res: Results, run: ServerRun, pg: bool) -> None:
    """Issue #39's limits, per store and concurrency (those of PostgreSQL need a server)."""
    for store, ours, peer in PAIRS:
        reason = None if pg or store != "postgres" else "needs --pg-dsn: a PostgreSQL server"
        for users in run.users:
            base = f"server.{store}.u{users}"
            where = f"{store}, {users} users x {run.turns} turns on one event loop"
            common: dict[str, Any] = {"section": "server", "per_call": False, "reason": reason}
            res.claim(
                f"{base}.throughput",
                f"{where}: turns per second, {ours} / {peer}",
                f"{base}.throughput.{ours}",
                f"{base}.throughput.{peer}",
                1.0,
                op=">=",
                **common,
            )
            res.claim(
                f"{base}.turn_p99",
                f"{where}: turn (ainvoke) p99, {ours} / {peer}",
                f"{base}.turn_p99.{ours}",
                f"{base}.turn_p99.{peer}",
                1.0,
                **common,
            )
            res.claim(
                f"{base}.lag_p99",
                f"{where}: event loop lag p99, {ours} / {peer}'s, "
                f"that counted as {LAG_ALLOWANCE_MS:g} ms where lower",
                f"{base}.lag_p99.{ours}",
                f"{base}.lag_allowance.{peer}",
                2.0,
                **common,
            )


# -- benchmarks/run.py ---------------------------------------------------------------


def section_server(cfg: Any, res: Results, workdir: Path) -> None:
    """The section's rows and claims at the run's sizes."""
    run = ServerRun(
        users=tuple(cfg.server_users),
        turns=cfg.server_turns,
        rounds=cfg.server_rounds,
        seed=cfg.seed,
        pg_dsn=cfg.pg_dsn,
    )
    if not cfg.pg_dsn:
        res.skipped["server.postgres"] = "no --pg-dsn given (a PostgreSQL server to measure on)"
    record(run, measure(run, workdir, log=lambda m: print(m, flush=True)), res)


# -- run alone -----------------------------------------------------------------------


def table(res: Results, run: ServerRun, stores: list[str]) -> list[str]:
    """Per store and concurrency: each metric's median round, ours and peer, their ratio."""
    lines = []
    for store, ours, peer in PAIRS:
        if store not in stores:
            continue
        for users in run.users:
            base = base_of(run, store, users)
            how = ""
            if f"{base}.offered" in res.rows:
                how = f", open loop at {res.rows[f'{base}.offered']['median']:.3g} turns/s offered"
            lines += ["", f"{store}, {users} users x {run.turns} turns{how}: {ours} vs {peer}"]
            lines.append(f"  {'metric':22}{'ours':>10}{'peer':>10}   ratio ours/peer [q1-q3]")
            for metric, (unit, _, _) in METRICS.items():
                a, b = f"{base}.{metric}.{ours}", f"{base}.{metric}.{peer}"
                ratios = res.per_round(a, b)
                ratio = (
                    "-"
                    if isinstance(ratios, str)
                    else "{:.2f} [{:.2f}-{:.2f}]".format(*spread(ratios))
                )
                lines.append(
                    f"  {metric + ' (' + unit + ')':22}{res.rows[a]['median']:>10.3g}"
                    f"{res.rows[b]['median']:>10.3g}   {ratio}"
                )
    if run.open_load is not None:
        return lines
    lines += ["", "claims:"]
    for claim in res.claims:
        if claim["ratio"] is None:
            lines.append(f"  {claim['label']}: not measured ({claim.get('note', '')})")
            continue
        lines.append(
            f"  {claim['label']}: {claim['ratio']:.3g} [{claim['q1']:.3g}-{claim['q3']:.3g}] "
            f"{claim['op']} {claim['bound']:g} -> {claim['verdict']}"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import tempfile

    from swarmstate._bench import environment

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--users", default="16,64", help="concurrent users, comma-separated")
    parser.add_argument("--turns", type=int, default=20, help="turns each user runs per round")
    parser.add_argument("--rounds", type=int, default=5, help="measured rounds (after a warm-up)")
    parser.add_argument("--pool-size", type=int, default=8, help="PostgreSQL pool size, both")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pg-dsn", default=None, help="PostgreSQL server for that store")
    parser.add_argument(
        "--open-load", type=float, default=None, metavar="F",
        help="open loop: Poisson arrivals at F (0-1) times the slower saver's warm-up turns/s",
    )  # fmt: skip
    parser.add_argument("--out", type=Path, default=None, help="write rows and claims as JSON")
    args = parser.parse_args(argv)
    users = tuple(int(u) for u in args.users.split(",") if u.strip())
    if not users or min(users) < 1 or args.turns < 1 or args.rounds < 1 or args.pool_size < 1:
        print("--users, --turns, --rounds and --pool-size must be at least 1", file=sys.stderr)
        return 2
    if args.open_load is not None and not 0 < args.open_load < 1:
        print("--open-load must be between 0 and 1 (a fraction of saturation)", file=sys.stderr)
        return 2
    run = ServerRun(
        users, args.turns, args.rounds, args.seed, args.pg_dsn, args.pool_size, args.open_load
    )
    res = Results()
    with tempfile.TemporaryDirectory(prefix="swarmstate-server-") as tmp:
        measured = measure(run, Path(tmp), log=lambda m: print(m, file=sys.stderr))
    record(run, measured, res)
    env = environment({**vars(run), "pg_dsn": "given" if run.pg_dsn else None})
    print(
        f"python {env['python']}, {env.get('cpus_usable', env['cpu_count'])} CPUs, "
        f"langgraph {env['packages'].get('langgraph')}, commit {env['git_commit']}"
    )
    print("\n".join(table(res, run, measured.stores)))
    if args.out:
        doc = {"environment": env, "rows": res.rows, "claims": res.claims}
        args.out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    return 0
