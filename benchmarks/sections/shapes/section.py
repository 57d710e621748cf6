"""Section "shapes": every state shape users write, ours against the saver each replaces.

One real LangGraph graph per shape (``graphs``: an input and three
plain-Python nodes per turn, seeded non-repetitive text), invoked with
``durability="sync"`` on ours over ``Store``, ``DiskStore`` NORMAL and
``PostgresStore`` (with ``--pg-dsn``) and on the saver each replaces:
``InMemorySaver``, ``SqliteSaver`` (WAL, ``synchronous=NORMAL``) and
``PostgresSaver`` on the same server (``savers``). Every contender
runs the same turns in lockstep (turn ``t`` on each, then turn ``t + 1``),
ours right beside its peer and the order reversed every turn, so machine
noise lands on both and a turn's ratio is paired.

Rows per shape and saver (``shapes.<shape>.<what>.<saver>``):

- ``put``: the runtime's own ``put`` calls, timed inside ``invoke`` by a
  subclass of the saver's class; a turn's figure is the median of its puts,
  paired with the peer's same turn, over the second half of the turns (a
  full window, and the larger half of a growing state);
- ``invoke``: each of those turns' ``invoke``;
- ``get_state``, after the last turn: a round's figure is the median of five
  calls, each of ours right beside its peer, after a garbage collection;
- ``get_state_new``: one ``get_state`` by a new saver on a new store or
  connection object over the same file or database (a restarted process),
  every round; not for the in-memory pair, which has no such reader;
- ``list10``: ``list(limit=10)`` on the thread (every namespace), median of
  three calls a round;
- ``bytes``: stored after the last turn: database plus WAL after a
  ``TRUNCATE`` checkpoint, the schema's relations on PostgreSQL, in memory
  the serialized bytes the saver holds (the growth section's measures).
  ``state_equal`` says whether the final state read back equals
  ``InMemorySaver``'s.

PostgreSQL tables are analyzed after the turns, before the reads (as the
postgres section does), so no read is planned for empty tables.

Claims (issue #28's limits): per shape, call and store, ours over its peer:
``invoke`` <= 1.0, ``put`` <= 1.0 durable and 1.1 in memory, ``get_state``
<= 1.0, ``get_state`` by a new saver <= 1.1, ``list(limit=10)`` <= 1.0, each
with its upper quartile within 5% of the limit; bytes <= 1.0, and lower per
shape (:data:`BYTES_BOUNDS`).

Run alone: ``python -m benchmarks.sections.shapes.section --turns 40 [--pg-dsn ...]``.
"""

import gc
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.sections.shapes.graphs import SHAPES, Shape, make_shape
from benchmarks.sections.shapes.savers import PAIRS, Contender, close_all, make_contenders
from swarmstate._bench import latency_stats

__all__ = ["BYTES_BOUNDS", "ShapeRun", "run_shape", "section_shapes"]

STATE_CALLS = 5
LIST_CALLS = 3
SPREAD_MARGIN = 1.05  # the upper quartile may exceed a limit by 5%
PUT_BOUNDS = {"memory": 1.1, "disk": 1.0, "postgres": 1.0}
CALL_BOUNDS = {"invoke": 1.0, "get_state": 1.0, "get_state_new": 1.1, "list10": 1.0}
BYTES_BOUNDS = {
    "dict_grow": 0.05,
    "dict_window": 0.25,
    "lc_trim": 0.25,
    "docs": 0.15,
    "plan": 0.5,
    "draft": 1.0,
    "subgraph": 0.05,
    "lc_grow": 0.05,
}
CALLS = {
    "put": "put p50",
    "invoke": "invoke p50",
    "get_state": "get_state p50",
    "get_state_new": "get_state p50 by a new saver on the same data (a restarted process)",
    "list10": "list(limit=10) p50",
}


@dataclass
class ShapeRun:
    """What one run of the section does."""

    turns: int = 120
    reads: int = 20  # rounds of reads after the last turn
    seed: int = 7
    pg_dsn: str | None = None
    shapes: tuple[str, ...] = tuple(SHAPES)


def first_measured(turns: int) -> int:
    """The first turn ``put`` and ``invoke`` are paired from: the second half."""
    return turns // 2


def run_shape(
    name: str, run: ShapeRun, tmp: Path, log: Callable[[str], None] = print
) -> dict[str, dict[str, Any]]:
    """Run one shape on every contender; ``{saver: figures}``."""
    shape = make_shape(name, run.seed, run.turns)
    # What the process held before this shape (modules, the script) stays out of
    # the collections the reads start with; what the turns build stays in, as a
    # user's threads do in theirs (the growth section's reasoning).
    gc.collect()
    gc.freeze()
    contenders = make_contenders(name, tmp, run.pg_dsn)
    try:
        graphs = [shape.build(c.checkpointer) for c in contenders]
        config = {"configurable": {"thread_id": f"shape-{name}"}}
        invoke_ns: list[list[int]] = [[] for _ in contenders]
        put_us: list[list[float]] = [[] for _ in contenders]  # a turn's median put
        first_put = [0] * len(contenders)  # index into puts where measured turns start
        start_at = first_measured(run.turns)
        for turn in range(run.turns):
            order = list(range(len(contenders)))
            for i in order if turn % 2 == 0 else order[::-1]:
                puts = contenders[i].puts
                if turn == start_at:
                    first_put[i] = len(puts)
                before = len(puts)
                begin = time.perf_counter_ns()
                graphs[i].invoke(shape.turn_input(turn), config, durability="sync")
                invoke_ns[i].append(time.perf_counter_ns() - begin)
                put_us[i].append(statistics.median(puts[before:]) / 1e3)
            if (turn + 1) % 40 == 0:
                log(f"   shapes {name}: turn {turn + 1}/{run.turns}")
        stored = [c.stored_bytes() for c in contenders]
        equal = _states_equal(graphs, contenders, config)
        for contender, same in zip(contenders, equal, strict=True):
            if not same:
                log(
                    f"   shapes {name}: {contender.name}'s final state differs from InMemorySaver's"
                )
        for contender in contenders:
            if contender.analyze is not None:
                contender.analyze()
        reads = _reads(shape, contenders, graphs, config, run.reads)
        out: dict[str, dict[str, Any]] = {}
        for i, contender in enumerate(contenders):
            out[contender.name] = {
                "store": contender.store,
                "ours": contender.ours,
                "bytes": stored[i],
                "state_equal": equal[i],
                "checkpoints": len(contender.puts),
                "put": latency_stats(contender.puts[first_put[i] :]),
                "put_by_turn": put_us[i],
                "invoke": latency_stats(invoke_ns[i][start_at:]),
                "invoke_by_turn": [v / 1e3 for v in invoke_ns[i]],
                **reads[i],
            }
        return out
    finally:
        close_all(contenders)
        gc.unfreeze()


def _states_equal(graphs: list[Any], contenders: list[Contender], config: Any) -> list[bool]:
    """Whether each contender's final state equals ``InMemorySaver``'s (exactness, not speed)."""
    names = [c.name for c in contenders]
    reference = graphs[names.index("InMemorySaver")].get_state(config).values
    return [graph.get_state(config).values == reference for graph in graphs]


def _reads(
    shape: Shape, contenders: list[Contender], graphs: list[Any], config: Any, rounds: int
) -> list[dict[str, Any]]:
    """``get_state``, ``get_state`` by a new saver and ``list(limit=10)``, ours beside its peer.

    Each call starts after a collection with no earlier result alive, as in
    the growth section: a state held while the next call builds its own
    makes the collector's passes land on whichever call comes second.
    """
    state: list[list[int]] = [[] for _ in contenders]  # ns, a round's figure each
    new: list[list[int]] = [[] for _ in contenders]
    listed: list[list[int]] = [[] for _ in contenders]
    thread = {"configurable": {"thread_id": config["configurable"]["thread_id"]}}
    clock = time.perf_counter_ns
    for round_no in range(rounds):
        for pair in _pairs(contenders):
            order = pair if round_no % 2 == 0 else pair[::-1]
            for i in order:
                reopen = contenders[i].reopen
                if reopen is None:
                    continue
                reader = reopen()
                try:
                    graph = shape.build(reader.checkpointer)
                    gc.collect()
                    begin = clock()
                    graph.get_state(config)
                    new[i].append(clock() - begin)
                finally:
                    reader.close()
                del graph, reader
            for i in order:
                gc.collect()
                calls = []
                for _ in range(STATE_CALLS):
                    begin = clock()
                    graphs[i].get_state(config)
                    calls.append(clock() - begin)
                state[i].append(int(statistics.median(calls)))
            for i in order:
                gc.collect()
                saver = contenders[i].checkpointer
                calls = []
                for _ in range(LIST_CALLS):
                    begin = clock()
                    page = list(saver.list(thread, limit=10))
                    calls.append(clock() - begin)
                    assert len(page) == 10, len(page)
                    del page
                listed[i].append(int(statistics.median(calls)))
    out = []
    for i in range(len(contenders)):
        figures: dict[str, Any] = {}
        for what, values in (
            ("get_state", state[i]),
            ("list10", listed[i]),
            ("get_state_new", new[i]),
        ):
            if values:
                figures[what] = {
                    **latency_stats(values),
                    "rounds_p50": [round(v / 1e3, 2) for v in values],
                }
        out.append(figures)
    return out


def _pairs(contenders: list[Contender]) -> list[list[int]]:
    """Indexes of (ours, peer) per store, as :data:`savers.PAIRS` pairs them."""
    index = {c.name: i for i, c in enumerate(contenders)}
    return [[index[a], index[b]] for _, a, b in PAIRS if a in index and b in index]


# -- rows and claims for benchmarks/run.py ------------------------------------------


def section_shapes(cfg: Any, res: Any, workdir: Path) -> None:
    """Rows ``shapes.<shape>.<what>.<saver>`` and a claim per shape, call and store."""
    run = ShapeRun(
        turns=30 if cfg.quick else 120,
        reads=min(cfg.rounds, 15 if cfg.quick else 20),
        seed=cfg.seed,
        pg_dsn=cfg.pg_dsn,
    )
    workdir.mkdir(parents=True, exist_ok=True)
    start = first_measured(run.turns)
    for name in run.shapes:
        began = time.perf_counter()
        figures = run_shape(name, run, workdir, log=lambda m: print(m, flush=True))
        print(f"   shapes {name}: {time.perf_counter() - began:.1f} s", flush=True)
        for saver, fig in figures.items():
            base = {
                "section": "shapes",
                "subject": saver,
                "param": run.turns,
                "shape": name,
                "store": fig["store"],
                "ours": fig["ours"],
            }
            res.add(
                f"shapes.{name}.bytes.{saver}",
                {"unit": "bytes", "p50": fig["bytes"], "rounds_p50": [fig["bytes"]]},
                group="bytes",
                batch=f"shapes.{name}.bytes",
                state_equal=fig["state_equal"],
                checkpoints=fig["checkpoints"],
                **base,
            )
            for what in ("put", "invoke"):
                per_turn = fig[f"{what}_by_turn"]
                stats = dict(fig[what])
                stats["rounds_p50"] = [round(v, 2) for v in per_turn[start:]]
                stats["by_turn"] = [round(v, 2) for v in per_turn]
                res.add(
                    f"shapes.{name}.{what}.{saver}",
                    {"unit": "us", **stats},
                    group=what,
                    batch=f"shapes.{name}.{what}",
                    **base,
                )
            for what in ("get_state", "get_state_new", "list10"):
                if what in fig:
                    res.add(
                        f"shapes.{name}.{what}.{saver}",
                        {"unit": "us", **fig[what]},
                        group=what,
                        batch=f"shapes.{name}.reads",
                        **base,
                    )
    shape_claims(res, run.turns, run.shapes, pg=cfg.pg_dsn is not None)


def shape_claims(res: Any, turns: int, shapes: tuple[str, ...], pg: bool) -> None:
    """Issue #28's limits, per shape, call and store (those of PostgreSQL need a server)."""
    start = first_measured(turns)
    for name in shapes:
        title = SHAPES[name].replace("`", "")
        for store, ours, peer in PAIRS:
            reason = None if pg or store != "postgres" else "needs --pg-dsn: a PostgreSQL server"
            bounds = {"put": PUT_BOUNDS[store], **CALL_BOUNDS}
            for call, bound in bounds.items():
                if call == "get_state_new" and store == "memory":
                    continue  # nothing to reopen in memory
                when = (
                    f"turns {start + 1}-{turns} of {turns}"
                    if call in ("put", "invoke")
                    else f"after {turns} turns"
                )
                res.claim(
                    f"shapes.{name}.{call}.{store}",
                    f"{title}: {CALLS[call]}, {when}, {ours} / {peer}",
                    f"shapes.{name}.{call}.{ours}",
                    f"shapes.{name}.{call}.{peer}",
                    bound,
                    section="shapes",
                    reason=reason,
                    spread_bound=round(bound * SPREAD_MARGIN, 4),
                )
            res.claim(
                f"shapes.{name}.bytes.{store}",
                f"{title}: bytes stored after {turns} turns, {ours} / {peer}",
                f"shapes.{name}.bytes.{ours}",
                f"shapes.{name}.bytes.{peer}",
                BYTES_BOUNDS[name],
                section="shapes",
                per_call=False,
                reason=reason,
            )


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=120)
    parser.add_argument("--reads", type=int, default=20)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    run = ShapeRun(args.turns, args.reads, args.seed, args.pg_dsn, tuple(args.shapes.split(",")))
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="swarmstate-shapes-") as tmp:
        for name in run.shapes:
            results[name] = run_shape(name, run, Path(tmp), log=lambda m: print(m, file=sys.stderr))
            _print(name, results[name])
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


def _print(name: str, figures: dict[str, dict[str, Any]]) -> None:
    print(f"== {name}: {SHAPES[name]}")
    calls = ("put", "invoke", "get_state", "get_state_new", "list10")
    print(f"{'ratio ours / peer':36}" + "".join(f"{c:>14}" for c in (*calls, "bytes")))
    for _, ours, peer in PAIRS:
        if ours not in figures:
            continue
        a, b = figures[ours], figures[peer]
        cells = [f"{a[c]['p50'] / b[c]['p50']:.2f}" if c in a and c in b else "-" for c in calls]
        cells.append(f"{a['bytes'] / b['bytes']:.3f}")
        print(f"{ours:36}" + "".join(f"{c:>14}" for c in cells))


if __name__ == "__main__":
    raise SystemExit(main())
