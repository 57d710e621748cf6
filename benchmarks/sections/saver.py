"""Section "saver": SwarmStateSaver against LangGraph's savers, in memory and durable on a file.

Both groups replay the same recorded conversation (see ``harness.savers``), once
with ``langchain_core`` messages and once with plain dict messages (the
``_dict`` groups, ``dict_stream``), and are never compared with each
other: in memory, SwarmStateSaver(Store) against InMemorySaver; durable,
SwarmStateSaver(DiskStore NORMAL/FULL) against SqliteSaver at NORMAL and as
shipped.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness.config import Config
from benchmarks.harness.results import Results
from benchmarks.harness.savers import (
    STREAMS,
    add_rows,
    apsw_writer,
    conversation,
    decode_floor,
    decode_floors,
    floor_rows,
    have,
    put_floor,
    read_claims,
)
from swarmstate._bench import Op
from swarmstate._bench.savers import Group, sqlite_saver

OURS, PEER = "SwarmStateSaver(Store)", "InMemorySaver"
NORMAL, FULL = "SwarmStateSaver(DiskStore NORMAL)", "SwarmStateSaver(DiskStore FULL)"
SHIPPED = "SqliteSaver shipped"
DICT_SPREAD = 1.05  # issue #28: the upper quartile within 5% of each limit


def measure(
    cfg: Config,
    res: Results,
    group: str,
    savers: dict[str, Any],
    fsync: dict[str, str],
    puts: Callable[[Any], list[Op]],
    *,
    scale: int = 1,
    setup: str | None = None,
    reads: Callable[..., Op] | None = None,
    subjects: dict[str, str] | None = None,
    stream: str = "pydantic",
    **options: Any,
) -> None:
    """Measure one group of savers with the floors beside them, and add its rows.

    ``puts(conversation)`` builds the put floors and ``reads`` the read
    floors (default: decode with no store; ``subjects`` then describes
    them); ``scale`` divides the call counts (a server round trip per call);
    ``setup`` says what ``options``' ``after_fill`` did, in every row;
    ``stream`` names the recorded stream (``harness.savers.STREAMS``);
    ``options`` go to ``Group``.
    """
    lengths = cfg.thread_lengths
    calls = cfg.few_calls(cfg.iters // scale)
    runner = Group(savers, lengths, calls, cfg.rounds, cfg.warmup, **options)
    runner.list_calls = cfg.few_calls(calls // 10)
    conv = conversation(cfg, runner.steps_needed(), stream)
    runner.extra_latest, runner.extra_list = decode_floors(conv, lengths, reads or decode_floor)
    runner.extra_put = puts(conv)
    got = runner.run(conv)
    section = "postgres" if group.startswith("postgres") else "saver"
    meta = {
        label: {"section": section, "fsync": fsync[label], "stream": stream} for label in savers
    }
    if setup is not None:
        for info in meta.values():
            info["setup"] = setup
    names = [op.name for op in runner.extra_put]
    add_rows(res, group, got, savers, lengths, meta, floor_rows(group, lengths, names), subjects)


def section_saver(cfg: Config, res: Results, workdir: Path) -> None:
    """In-memory and durable checkpoint latency, and latest reads as the thread grows."""
    workdir.mkdir(parents=True, exist_ok=True)
    have_saver = have("swarmstate.integrations.langgraph", "SwarmStateSaver")
    have_disk = have("swarmstate.backends.disk", "DiskStore")
    if not have_saver:
        res.skipped["saver.SwarmStateSaver"] = "swarmstate.integrations.langgraph not available"
    if not have_disk:
        res.skipped["saver.DiskStore"] = "swarmstate.backends.disk not available"

    for stream in STREAMS:
        _measure_stream(cfg, res, workdir, stream, have_saver=have_saver, have_disk=have_disk)
    _claims(cfg, res)
    _dict_claims(cfg, res)


def _measure_stream(
    cfg: Config, res: Results, workdir: Path, stream: str, *, have_saver: bool, have_disk: bool
) -> None:
    """The memory and durable groups on one recorded stream (``_dict`` groups for dicts)."""
    from langgraph.checkpoint.memory import InMemorySaver

    tail = "" if stream == "pydantic" else f"_{stream}"
    memory: dict[str, Any] = {PEER: InMemorySaver()}
    if have_saver:
        import swarmstate
        from swarmstate.integrations.langgraph import SwarmStateSaver

        memory = {OURS: SwarmStateSaver(swarmstate.Store()), **memory}
    measure(
        cfg,
        res,
        f"memory{tail}",
        memory,
        dict.fromkeys(memory, "none (in memory)"),
        lambda conv: [put_floor(conv, "floor.put")],
        stream=stream,
    )

    durable: dict[str, Any] = {}
    fsync: dict[str, str] = {}
    if have_saver and have_disk:
        from swarmstate.backends.disk import DiskStore
        from swarmstate.integrations.langgraph import SwarmStateSaver

        for level in ("NORMAL", "FULL"):
            label = f"SwarmStateSaver(DiskStore {level})"
            store = DiskStore(workdir / f"disk-{level}{tail}.db", synchronous=level)
            durable[label] = SwarmStateSaver(store)
            fsync[label] = f"WAL, synchronous={level}"
    for label, level in (("SqliteSaver NORMAL", "NORMAL"), (SHIPPED, None)):
        durable[label], actual = sqlite_saver(workdir / f"{label.split()[1]}{tail}.sqlite", level)
        fsync[label] = f"WAL, synchronous={actual}"

    def floors(conv: Any) -> list[Any]:
        return [
            put_floor(
                conv, f"floor.put.{level}", apsw_writer(workdir / f"{level}{tail}.floor", level)
            )
            for level in ("NORMAL", "FULL")
        ]

    measure(cfg, res, f"durable{tail}", durable, fsync, floors, stream=stream)
    for saver in durable.values():
        owner = getattr(saver, "store", None) or getattr(saver, "conn", None)
        close = getattr(owner, "close", None)
        if close is not None:
            close()


def _claims(cfg: Config, res: Results) -> None:
    res.claim(
        "memory.put",
        f"in memory: put, {OURS} / {PEER}",
        f"memory.put.{OURS}",
        f"memory.put.{PEER}",
        1.0,
        section="saver",
        floor="memory.put.floor",
        floor_label=f"in memory: put, {OURS}",
    )
    bounds = {"mid": 0.8, "long": 0.4, "flat": 1.2, "list": 0.25}
    read_claims(res, cfg, "memory", "in memory", OURS, PEER, bounds)
    for claim_id, ours, peer, bound, level in (
        ("durable.put.normal", NORMAL, "SqliteSaver NORMAL", 0.7, "NORMAL"),
        ("durable.put.normal_vs_shipped", NORMAL, SHIPPED, 0.25, "NORMAL"),
        ("durable.put.full", FULL, SHIPPED, 1.0, "FULL"),
    ):
        res.claim(
            claim_id,
            f"durable: put, {ours} / {peer}" + (" (FULL)" if peer == SHIPPED else ""),
            f"durable.put.{ours}",
            f"durable.put.{peer}",
            bound,
            section="saver",
            floor=f"durable.put.floor.{level}",
            floor_label=f"durable: put, {ours}",
        )
    bounds = {"mid": 0.8, "long": 0.8, "flat": 1.2, "list": 0.5}
    read_claims(res, cfg, "durable", "durable", NORMAL, SHIPPED, bounds)


def _dict_claims(cfg: Config, res: Results) -> None:
    """The plain-dict stream against the savers each of ours replaces (issue #28's limits)."""
    for claim_id, ours, peer, bound, level in (
        ("memory_dict.put", OURS, PEER, 1.1, None),
        ("durable_dict.put.normal", NORMAL, "SqliteSaver NORMAL", 1.0, "NORMAL"),
        ("durable_dict.put.full", FULL, SHIPPED, 1.0, "FULL"),
    ):
        group = claim_id.split(".", 1)[0]
        res.claim(
            claim_id,
            f"dict messages, {group.removesuffix('_dict')}: put, {ours} / {peer}",
            f"{group}.put.{ours}",
            f"{group}.put.{peer}",
            bound,
            section="saver",
            floor=f"{group}.put.floor" + (f".{level}" if level else ""),
            floor_label=f"dict messages, {group.removesuffix('_dict')}: put, {ours}",
            spread_bound=round(bound * DICT_SPREAD, 4),
        )
    bounds = {"mid": 1.0, "long": 1.0, "flat": 1.2, "list": 1.0}
    where = {"margin": DICT_SPREAD}
    read_claims(res, cfg, "memory_dict", "dict messages, in memory", OURS, PEER, bounds, **where)
    read_claims(
        res,
        cfg,
        "durable_dict",
        "dict messages, durable",
        NORMAL,
        "SqliteSaver NORMAL",
        bounds,
        **where,
    )
