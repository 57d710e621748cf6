"""The growing conversation: a real LangGraph chat graph, checkpointed turn after turn.

What users run: a graph whose ``messages`` channel (``add_messages``) grows
by a user message and the agent's, tool's and answer's messages every turn,
invoked with ``durability="sync"``. Every saver runs the same seeded
conversation in lockstep (turn ``t`` on each saver, then turn ``t + 1``), so
machine noise lands on all of them alike, and per-turn ratios between a
saver and its peer are paired.

Text is seeded random words from a large vocabulary, never repeated
phrases: PostgreSQL's TOAST compresses repetition away and would hide what
a layout really stores.

Rows per saver (``growth.<graph>.<saver>.<what>``): ``bytes`` stored after
the last turn (SQLite: database plus WAL after a ``TRUNCATE`` checkpoint;
PostgreSQL: relation sizes; memory: serialized bytes kept), and bytes at
intermediate turns for the chart; ``put`` and ``invoke`` percentiles over
the last 10% of turns (at least 10: :func:`tail_turns`), paired turn by
turn with the peer (a turn's median put, its invoke); ``get_state`` and ``history20``
(``get_state_history(limit=20)``) percentiles after the last turn, each of
ours timed beside its peer, and ``get_state_first`` (one read by a new
checkpointer, nothing cached). Graphs:
``plain`` (``add_messages``) and ``delta`` (the same messages through
LangGraph's beta ``DeltaChannel``).

Run alone: ``python -m benchmarks.sections.growth --turns 200 [--pg-dsn ...]``.
"""

import functools
import gc
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypedDict

from benchmarks.harness.growth_savers import GrowthConfig, Saver, make_savers

__all__ = ["GrowthConfig", "Saver", "conversation", "run_growth", "section_growth"]

VOCABULARY = 20_000
HISTORY_LIMIT = 20
STATE_CALLS = 5  # get_state calls per saver and round (their median is the round's)


# -- the conversation -----------------------------------------------------------


def _vocabulary(rng: random.Random) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    return ["".join(rng.choices(letters, k=rng.randint(2, 10))) for _ in range(VOCABULARY)]


def conversation(seed: int, turns: int) -> list[dict[str, Any]]:
    """``turns`` turns of seeded text: the user's question, a tool call, its result, an answer."""
    rng = random.Random(f"{seed}:growth")
    words = _vocabulary(rng)

    def text(count: int) -> str:
        return " ".join(rng.choices(words, k=count))

    return [
        {
            "user": text(rng.randint(25, 60)),
            "think": text(rng.randint(15, 40)),
            "query": text(rng.randint(3, 8)),
            "tool": text(rng.randint(40, 90)),
            "answer": text(rng.randint(30, 80)),
        }
        for _ in range(turns)
    ]


def build_graph(checkpointer: Any, delta: bool, script: list[dict[str, Any]]) -> Any:
    """START -> agent -> tool -> answer -> END over a ``messages`` channel.

    The nodes read their turn's text from ``script`` (plain Python nodes, no LLM).
    """
    from langchain_core.messages import AIMessage, AnyMessage, ToolMessage
    from langgraph.graph import END, START, StateGraph
    from langgraph.graph.message import add_messages

    if delta:
        from langgraph.channels import DeltaChannel

        def fold(state: list[Any], writes: list[Any]) -> list[Any]:
            return functools.reduce(add_messages, writes, state)

        class DeltaChat(TypedDict):
            messages: Annotated[list[AnyMessage], DeltaChannel(fold)]
            turn: int

        state_type: Any = DeltaChat
    else:

        class Chat(TypedDict):
            messages: Annotated[list[AnyMessage], add_messages]
            turn: int

        state_type = Chat

    def agent(state: Any) -> dict[str, Any]:
        turn = state["turn"]
        return {
            "messages": [
                AIMessage(
                    content=script[turn]["think"],
                    id=f"agent-{turn}",
                    tool_calls=[
                        {
                            "name": "search",
                            "args": {"q": script[turn]["query"]},
                            "id": f"call-{turn}",
                        }
                    ],
                )
            ]
        }

    def tool(state: Any) -> dict[str, Any]:
        turn = state["turn"]
        return {
            "messages": [
                ToolMessage(
                    content=script[turn]["tool"], tool_call_id=f"call-{turn}", id=f"tool-{turn}"
                )
            ]
        }

    def answer(state: Any) -> dict[str, Any]:
        turn = state["turn"]
        return {"messages": [AIMessage(content=script[turn]["answer"], id=f"answer-{turn}")]}

    builder = StateGraph(state_type)
    builder.add_node("agent", agent)
    builder.add_node("tool", tool)
    builder.add_node("answer", answer)
    builder.add_edge(START, "agent")
    builder.add_edge("agent", "tool")
    builder.add_edge("tool", "answer")
    builder.add_edge("answer", END)
    return builder.compile(checkpointer=checkpointer)


# -- the run --------------------------------------------------------------------


def _percentiles(samples_ns: list[int]) -> dict[str, float]:
    ordered = sorted(samples_ns)
    q = (
        statistics.quantiles(ordered, n=100, method="inclusive")
        if len(ordered) > 1
        else [ordered[0]] * 99
    )
    return {
        "p50": statistics.median(ordered) / 1e3,
        "p90": q[89] / 1e3,
        "p99": q[98] / 1e3,
        "min": ordered[0] / 1e3,
        "n": len(ordered),
    }


def run_growth(cfg: GrowthConfig, tmp: Path, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Run every graph on every saver; returns ``{graph: {saver: figures}}``."""
    script = conversation(cfg.seed, cfg.turns)
    from langchain_core.messages import HumanMessage

    results: dict[str, Any] = {}
    tail_from = cfg.turns - tail_turns(cfg.turns)
    for graph_name in cfg.graphs:
        savers = make_savers(cfg, tmp, graph_name)
        graphs = [build_graph(s.checkpointer, graph_name == "delta", script) for s in savers]
        config = {"configurable": {"thread_id": f"chat-{graph_name}"}}
        invoke_ns: list[list[int]] = [[] for _ in savers]
        put_marks: list[list[int]] = [[] for _ in savers]  # index into puts at each turn's end
        bytes_at: list[dict[int, int]] = [{} for _ in savers]
        put_by_turn: list[list[float]] = [[] for _ in savers]
        try:
            for turn in range(cfg.turns):
                order = range(len(savers)) if turn % 2 == 0 else reversed(range(len(savers)))
                for i in order:
                    saver = savers[i]
                    before = len(saver.puts)
                    start = time.perf_counter_ns()
                    graphs[i].invoke(
                        {
                            "messages": [
                                HumanMessage(content=script[turn]["user"], id=f"user-{turn}")
                            ],
                            "turn": turn,
                        },
                        config,
                        durability="sync",
                    )
                    invoke_ns[i].append(time.perf_counter_ns() - start)
                    turn_puts = saver.puts[before:]
                    put_by_turn[i].append(statistics.median(turn_puts) / 1e3 if turn_puts else 0.0)
                    put_marks[i].append(len(saver.puts))
                if turn + 1 in cfg.marks or turn + 1 == cfg.turns:
                    for i, saver in enumerate(savers):
                        bytes_at[i][turn + 1] = saver.stored_bytes()
                if (turn + 1) % 50 == 0:
                    log(f"   growth {graph_name}: turn {turn + 1}/{cfg.turns}")
            # Not frozen out of the collector: a user's process holds its
            # threads too, and the collections inside a read that scan them are
            # part of what a read costs there (freezing narrowed the spread
            # below what two runs differ by).
            reads = _reads(cfg, savers, graphs, config, graph_name == "delta", script)
            for i, saver in enumerate(savers):
                first_put = put_marks[i][tail_from - 1] if tail_from > 0 else 0
                results.setdefault(graph_name, {})[saver.name] = {
                    "bytes": bytes_at[i][cfg.turns],
                    "bytes_at": bytes_at[i],
                    "put": _percentiles(saver.puts[first_put:]),
                    "put_by_turn": put_by_turn[i],
                    "invoke": _percentiles(invoke_ns[i][tail_from:]),
                    "invoke_by_turn": [v / 1e3 for v in invoke_ns[i]],
                    **reads[i],
                }
        finally:
            for saver in savers:
                saver.close()
    return results


def tail_turns(turns: int) -> int:
    """The last turns put and invoke are measured over: 10% of them, at least 10."""
    return min(turns, max(10, turns // 10))


def _reads(
    cfg: GrowthConfig,
    savers: list[Saver],
    graphs: list[Any],
    config: Any,
    delta: bool,
    script: list[dict[str, Any]],
) -> list[dict[str, Any]]:
    """``get_state`` and ``get_state_history(limit=20)`` of the final thread, paired.

    Also ``get_state_first``: one ``get_state`` by a new checkpointer over the
    same stored data, so nothing earlier reads cached is used (a process that
    just started, or a thread not read for long). The peers cache nothing
    between calls: their own checkpointer is such a reader.

    Each of ours is timed right beside its peer (which goes first alternates by
    round; a round's ``get_state`` is the median of five calls), so a per-round
    ratio compares two calls made under the same conditions rather than calls
    seven savers apart. Every call starts after a
    collection with no earlier result alive: twenty 800-message states held
    while the next call builds its own make the cyclic collector's full passes
    land on whichever call comes second (2.5x slower, whichever saver it is).
    """
    state_ns: list[list[int]] = [[] for _ in savers]
    history_ns: list[list[int]] = [[] for _ in savers]
    first_ns: list[list[int]] = [[] for _ in savers]
    for round_no in range(cfg.reads):
        for group in _read_groups(savers):
            order = group if round_no % 2 == 0 else group[::-1]
            for i in order:
                first = _first_reader(savers[i], delta, script)
                gc.collect()
                start = time.perf_counter_ns()
                first.get_state(config)
                first_ns[i].append(time.perf_counter_ns() - start)
                del first
            for i in order:
                gc.collect()
                calls = []
                for _ in range(STATE_CALLS):
                    start = time.perf_counter_ns()
                    graphs[i].get_state(config)
                    calls.append(time.perf_counter_ns() - start)
                state_ns[i].append(int(statistics.median(calls)))
            for i in order:
                gc.collect()
                start = time.perf_counter_ns()
                history = list(graphs[i].get_state_history(config, limit=HISTORY_LIMIT))
                history_ns[i].append(time.perf_counter_ns() - start)
                assert len(history) == HISTORY_LIMIT
                del history
    return [
        {
            "get_state": {
                **_percentiles(state_ns[i]),
                "rounds_p50": [t / 1e3 for t in state_ns[i]],
            },
            "history20": {
                **_percentiles(history_ns[i]),
                "rounds_p50": [t / 1e3 for t in history_ns[i]],
            },
            "get_state_first": {
                **_percentiles(first_ns[i]),
                "rounds_p50": [t / 1e3 for t in first_ns[i]],
            },
        }
        for i in range(len(savers))
    ]


def _first_reader(saver: Saver, delta: bool, script: list[dict[str, Any]]) -> Any:
    """A graph over a new checkpointer on ``saver``'s stored data, with nothing cached."""
    from swarmstate.integrations.langgraph import SwarmStateSaver

    checkpointer = saver.checkpointer
    if isinstance(checkpointer, SwarmStateSaver):
        checkpointer = SwarmStateSaver(checkpointer.store)
    return build_graph(checkpointer, delta, script)


def _read_groups(savers: list[Saver]) -> list[list[int]]:
    """Savers timed back to back: each of ours with its peer, the others alone."""
    index = {saver.name: i for i, saver in enumerate(savers)}
    groups = [[index[a], index[b]] for a, b in PEERS.items() if a in index and b in index]
    paired = {i for group in groups for i in group}
    return groups + [[i] for i in range(len(savers)) if i not in paired]


def main(argv: list[str] | None = None) -> int:
    import argparse
    import json
    import tempfile

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--reads", type=int, default=15)
    parser.add_argument("--pg-dsn", default=None)
    parser.add_argument("--graphs", default="plain,delta")
    parser.add_argument("--savers", default=None, help="comma-separated saver names")
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    cfg = GrowthConfig(
        turns=args.turns,
        seed=args.seed,
        reads=args.reads,
        pg_dsn=args.pg_dsn,
        graphs=tuple(args.graphs.split(",")),
        savers=tuple(args.savers.split(",")) if args.savers else None,
        marks=(*(m for m in (10, 25, 50, 100, 150, 200, 400) if m < args.turns), args.turns),
    )
    with tempfile.TemporaryDirectory(prefix="swarmstate-growth-") as tmp:
        results = run_growth(cfg, Path(tmp), log=lambda m: print(m, file=sys.stderr))
    for graph, by_saver in results.items():
        print(f"== {graph}")
        head = ("bytes", "put p50", "invoke p50", "get_state", "hist20", "first get")
        print(f"{'saver':36}" + "".join(f"{h:>12}" for h in head))
        for name, fig in by_saver.items():
            cells = (fig["bytes"], fig["put"]["p50"], fig["invoke"]["p50"])
            cells += (fig["get_state"]["p50"], fig["history20"]["p50"])
            cells += (fig["get_state_first"]["p50"],)
            print(f"{name:36}" + "".join(f"{c:>12,.0f}" for c in cells))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


# -- rows and claims for benchmarks/run.py -----------------------------------------

OURS_MEMORY = "SwarmStateSaver(Store)"
OURS_NORMAL = "SwarmStateSaver(DiskStore NORMAL)"
OURS_FULL = "SwarmStateSaver(DiskStore FULL)"
OURS_PG = "SwarmStateSaver(PostgresStore)"
PEERS = {
    OURS_MEMORY: "InMemorySaver",
    OURS_NORMAL: "SqliteSaver NORMAL",
    OURS_FULL: "SqliteSaver shipped",
    OURS_PG: "PostgresSaver",
}
BYTES_BOUNDS = {OURS_NORMAL: ("SqliteSaver shipped", 0.02), OURS_PG: ("PostgresSaver", 0.03)}
BYTES_BOUNDS_MEMORY = ("InMemorySaver", 0.05)
PUT_BOUNDS = {OURS_NORMAL: 0.8, OURS_FULL: 0.7, OURS_PG: 0.3}
# A first read pays what a warm read does not: the serializer's validation of
# every message (rebuilt from the third read on, docs/langgraph.md) and the
# list's segments. Not the limit: the honest counterpart of get_state.
FIRST_READ_BOUND = 1.25


def section_growth(cfg: Any, res: Any, workdir: Path) -> None:
    """Rows ``growth.<graph>.<what>.<saver>`` and the claims on them (module docstring)."""
    turns = 30 if cfg.quick else 200
    growth = GrowthConfig(
        turns=turns,
        seed=cfg.seed,
        reads=40 if cfg.quick else 15,  # two quick runs agreed on every claim at 40, not at 25
        marks=(*(m for m in (10, 25, 50, 100, 150, 200) if m < turns), turns),
        pg_dsn=cfg.pg_dsn,
    )
    workdir.mkdir(parents=True, exist_ok=True)
    results = run_growth(growth, workdir, log=lambda m: print(m, flush=True))
    tail = tail_turns(turns)
    for graph, by_saver in results.items():
        for saver, fig in by_saver.items():
            base = {"section": "growth", "subject": saver, "param": turns, "graph": graph}
            res.add(
                f"growth.{graph}.bytes.{saver}",
                {"unit": "bytes", "p50": fig["bytes"], "rounds_p50": [fig["bytes"]]},
                group="bytes",
                batch="growth.bytes",
                bytes_at={str(k): v for k, v in fig["bytes_at"].items()},
                **base,
            )
            # Rounds: the last turns, each turn's median put and its invoke
            # against the peer's same turn. (Put by put would pair puts of
            # different kinds, the input's, the agent's, the tool's, whose
            # ratios differ: a spread of kinds, not of noise.)
            for what, per_turn in (("put", fig["put_by_turn"]), ("invoke", fig["invoke_by_turn"])):
                stats = dict(fig[what])
                stats["rounds_p50"] = [round(v, 2) for v in per_turn[-tail:]]
                stats["by_turn"] = [round(v, 2) for v in per_turn]
                res.add(
                    f"growth.{graph}.{what}.{saver}",
                    {"unit": "us", **stats},
                    group=what,
                    batch=f"growth.{graph}.{what}",
                    **base,
                )
            for what in ("get_state", "history20", "get_state_first"):
                res.add(
                    f"growth.{graph}.{what}.{saver}",
                    {"unit": "us", **fig[what]},
                    group=what,
                    batch=f"growth.{graph}.reads",
                    **base,
                )
    _growth_claims(res, turns, pg=cfg.pg_dsn is not None)


def _growth_claims(res: Any, turns: int, pg: bool) -> None:
    size = f"{turns} turns"
    last = f"last {tail_turns(turns)} of {turns} turns"
    no_pg = None if pg else "needs --pg-dsn"

    def claim(cid: str, label: str, num: str, den: str, bound: float, server: bool) -> None:
        res.claim(
            f"growth.{cid}",
            label,
            num,
            den,
            bound,
            section="growth",
            per_call=False,
            reason=no_pg if server else None,
        )

    for ours, (peer, bound) in BYTES_BOUNDS.items():
        claim(
            f"bytes.{ours}",
            f"bytes stored after {size}, {ours} / {peer}",
            f"growth.plain.bytes.{ours}",
            f"growth.plain.bytes.{peer}",
            bound,
            ours == OURS_PG,
        )
    peer, bound = BYTES_BOUNDS_MEMORY
    claim(
        f"bytes.{OURS_MEMORY}",
        f"bytes stored after {size}, {OURS_MEMORY} / {peer}",
        f"growth.plain.bytes.{OURS_MEMORY}",
        f"growth.plain.bytes.{peer}",
        bound,
        False,
    )
    claim(
        "bytes.delta_peer",
        f"bytes stored after {size}, {OURS_NORMAL} / SqliteSaver NORMAL running the "
        "DeltaChannel version of the graph",
        f"growth.plain.bytes.{OURS_NORMAL}",
        "growth.delta.bytes.SqliteSaver NORMAL",
        1.0,
        False,
    )
    for ours, peer in PEERS.items():
        server = ours == OURS_PG
        if ours in PUT_BOUNDS:
            claim(
                f"put.{ours}",
                f"put p50, {last}, {ours} / {peer}",
                f"growth.plain.put.{ours}",
                f"growth.plain.put.{peer}",
                PUT_BOUNDS[ours],
                server,
            )
            claim(
                f"invoke.{ours}",
                f"invoke p50, {last}, {ours} / {peer}",
                f"growth.plain.invoke.{ours}",
                f"growth.plain.invoke.{peer}",
                0.9,
                server,
            )
        claim(
            f"get_state.{ours}",
            f"get_state p50 after {size}, {ours} / {peer}",
            f"growth.plain.get_state.{ours}",
            f"growth.plain.get_state.{peer}",
            1.05,
            server,
        )
        claim(
            f"history20.{ours}",
            f"get_state_history(limit=20) p50 after {size}, {ours} / {peer}",
            f"growth.plain.history20.{ours}",
            f"growth.plain.history20.{peer}",
            1.0,
            server,
        )
        claim(
            f"get_state_first.{ours}",
            f"get_state p50 after {size} by a new checkpointer (nothing cached), {ours} / {peer}",
            f"growth.plain.get_state_first.{ours}",
            f"growth.plain.get_state_first.{peer}",
            FIRST_READ_BOUND,
            server,
        )
    claim(
        "delta.put",
        f"DeltaChannel graph: put p50, {last}, {OURS_NORMAL} / SqliteSaver NORMAL",
        f"growth.delta.put.{OURS_NORMAL}",
        "growth.delta.put.SqliteSaver NORMAL",
        1.0,
        False,
    )
    claim(
        "delta.history20",
        f"DeltaChannel graph: get_state_history(limit=20) p50 after {size}, "
        f"{OURS_PG} / PostgresSaver",
        f"growth.delta.history20.{OURS_PG}",
        "growth.delta.history20.PostgresSaver",
        0.8,
        True,
    )


if __name__ == "__main__":
    raise SystemExit(main())
