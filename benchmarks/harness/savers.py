"""What the checkpointer sections share: the recorded conversation, floors, rows and claims.

Every saver of every section (in memory, durable, PostgreSQL) replays the
same recorded LangGraph conversation (``swarmstate._bench.conversation``): threads
of every length carry the runtime's pending writes, and ``put`` gets
``new_versions`` from the saver's own ``get_next_version``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness.config import Config
from benchmarks.harness.data import bare_apsw
from benchmarks.harness.results import Results
from swarmstate._bench import Op, round_stats

_CONVERSATIONS: dict[str, Any] = {}


def have(module: str, attr: str) -> bool:
    """Whether ``module`` imports and has ``attr`` (a backend another branch may lack)."""
    try:
        return hasattr(importlib.import_module(module), attr)
    except ImportError:
        return False


STREAMS = ("pydantic", "dict")  # the recorded streams: langchain_core messages, plain dicts


def conversation(cfg: Config, steps: int, stream: str = "pydantic") -> Any:
    """The run's recorded conversation, at least ``steps`` checkpoints; recorded once.

    ``stream``: ``pydantic`` (``swarmstate._bench.conversation``'s agent) or
    ``dict`` (the same agent with plain dict messages, ``dict_stream``).
    """
    from swarmstate._bench.conversation import Conversation

    key = f"{cfg.seed}:{stream}"
    known = _CONVERSATIONS.get(key)
    if known is None or len(known) < steps:
        need = max(steps, cfg.long_thread, cfg.iters + cfg.warmup + 2)
        if stream == "dict":
            from benchmarks.harness import dict_stream

            known = dict_stream.record(f"{cfg.seed}:saver", need)
        else:
            known = Conversation.record(f"{cfg.seed}:saver", need)
        _CONVERSATIONS[key] = known
    return known


def _serde() -> Any:
    from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

    return JsonPlusSerializer()


def floor_blobs(conv: Any, last: int, count: int) -> list[tuple[Any, Any]]:
    """Checkpoints ``last - count + 1 .. last`` as a store holds them: serializer-typed blobs.

    Their channel values, metadata and pending writes, each encoded by
    LangGraph's serializer: every saver that returns those checkpoints
    decodes at least these bytes (the peers split them differently).
    """
    serde = _serde()
    steps = conv.steps[last - count + 1 : last + 1]
    blobs = [serde.dumps_typed(v) for s in steps for v in s.checkpoint["channel_values"].values()]
    blobs += [serde.dumps_typed(s.metadata) for s in steps]
    blobs += [serde.dumps_typed(v) for s in steps for t in s.tasks for _, v in t.writes]
    return blobs


def decode_floor(conv: Any, name: str, last: int, count: int) -> Op:
    """Decoding :func:`floor_blobs` with LangGraph's serializer, with no store at all."""
    blobs = floor_blobs(conv, last, count)
    loads = _serde().loads_typed
    return Op(name, lambda i: [loads(b) for b in blobs])


def put_floor(conv: Any, name: str, write: Callable[[str, bytes], object] | None = None) -> Op:
    """The least a ``put`` does: encode what changed and (``write``) store it in one statement.

    Encodes the channel values named in ``new_versions`` and the metadata
    with LangGraph's serializer, then ``write(checkpoint id, bytes)``. Call
    ``i`` encodes the checkpoint the savers' put ``i`` stores.
    """
    dumps = _serde().dumps_typed
    ids = [s.checkpoint["id"] for s in conv.steps]

    def encode(i: int) -> bytes:
        step = conv.steps[i + 1]
        values = step.checkpoint["channel_values"]
        changed = {ch: values[ch] for ch in step.new_versions if ch in values}
        return bytes(dumps(changed)[1]) + bytes(dumps(step.metadata)[1])

    if write is None:
        return Op(name, encode)
    return Op(name, lambda i: write(ids[i + 1], encode(i)))


def apsw_writer(path: Path, synchronous: str) -> Callable[[str, bytes], object]:
    """One bare apsw INSERT OR REPLACE per call (WAL, ``synchronous``): a durable put's floor."""
    conn = bare_apsw(path, synchronous)
    sql = "INSERT OR REPLACE INTO kv VALUES ('put', ?1, ?2)"
    return lambda key, data: conn.execute(sql, (key, data))


def add_rows(
    res: Results,
    group: str,
    got: Any,
    savers: dict[str, Any],
    lengths: list[int],
    meta: dict[str, Any],
    floors: dict[str, str],
    subjects: dict[str, str] | None = None,
) -> None:
    """Rows of one measured saver group, and of the floors timed beside it.

    ``floors`` maps a floor op's name to its row id; ``meta[label]`` is each
    saver's description (section, fsync...).
    """
    longest = max(lengths)
    for label in savers:
        info = {**meta[label], "saver_group": group, "saver": label}
        for n in lengths:
            res.add(
                f"{group}.latest.{label}.{n}",
                round_stats(got.latest[(label, n)]),
                group="latest",
                subject="get_tuple (latest)",
                param=n,
                pending_writes=got.pending_on_latest[n],
                batch=f"{group}.latest",
                **info,
            )
        res.add(
            f"{group}.list10.{label}.{longest}",
            round_stats(got.listed[label]),
            group="list",
            subject="list(limit=10)",
            param=longest,
            batch=f"{group}.list",
            **info,
        )
        for kind, subject, samples in (
            ("put", "put", got.put),
            ("put_writes", "put_writes (one task's writes)", got.writes),
        ):
            res.add(
                f"{group}.{kind}.{label}",
                round_stats(samples[label]),
                group=kind,
                subject=subject,
                param=None,
                batch=f"{group}.put",
                **info,
            )
    first = next(iter(meta.values()))
    section = first["section"]
    fsync_of_floor = first["fsync"] if subjects else "none (no store)"
    for name, row_id in floors.items():
        kind = row_id.split(".")[1]
        batch = {"latest": "latest", "list10": "list", "put": "put"}[kind]
        res.add(
            row_id,
            round_stats(got.extra[name]),
            section=section,
            saver_group=group,
            saver="floor",
            group="floor",
            subject=(subjects or FLOOR_SUBJECTS)[name.split("|")[0]],
            param=int(row_id.rsplit(".", 1)[1]) if kind != "put" else None,
            fsync=FLOOR_FSYNC.get(name, fsync_of_floor),
            batch=f"{group}.{batch}",
        )


FLOOR_SUBJECTS = {
    "floor.latest": "serializer decode of the latest checkpoint and its writes, no store",
    "floor.list": "serializer decode of the 10 newest checkpoints and their writes, no store",
    "floor.put": "serializer encode of the changed channels and metadata, no store",
    "floor.put.NORMAL": "serializer encode + one bare apsw INSERT OR REPLACE of its bytes",
    "floor.put.FULL": "serializer encode + one bare apsw INSERT OR REPLACE of its bytes",
}
FLOOR_FSYNC = {
    "floor.put.NORMAL": "WAL, synchronous=NORMAL",
    "floor.put.FULL": "WAL, synchronous=FULL",
}
# A section may describe its own floors (their subject and fsync) by op name.
SERVER_FLOORS = {
    "floor.latest": "one SELECT of the latest checkpoint's bytes from a bare table, then decode",
    "floor.list": "one SELECT of the 10 newest checkpoints' bytes from a bare table, then decode",
    "floor.put": "serializer encode + one bare INSERT of its bytes (its own commit)",
}


def decode_floors(
    conv: Any, lengths: list[int], make: Callable[..., Op] = decode_floor
) -> tuple[dict[int, Op], list[Op]]:
    """The latest-read floor of each thread length, and the list floor of the longest.

    ``make(conv, name, last, count)`` builds one (default: decode, no store).
    """
    latest = {n: make(conv, f"floor.latest|{n}", n - 1, 1) for n in lengths}
    return latest, [make(conv, "floor.list", max(lengths) - 1, 10)]


def floor_rows(group: str, lengths: list[int], puts: list[str]) -> dict[str, str]:
    """Row ids of a group's floors, by op name."""
    rows = {f"floor.latest|{n}": f"{group}.latest.floor.{n}" for n in lengths}
    rows["floor.list"] = f"{group}.list10.floor.{max(lengths)}"
    for name in puts:
        level = name.removeprefix("floor.put").lstrip(".")
        rows[name] = f"{group}.put.floor" + (f".{level}" if level else "")
    return rows


def read_claims(
    res: Results,
    cfg: Config,
    group: str,
    where: str,
    ours: str,
    peer: str,
    bounds: dict[str, float],
    reason: str | None = None,
    margin: float | None = None,
) -> None:
    """The latest-read and list claims of one group (``bounds``: mid, long, flat, list).

    ``reason``: why this run cannot measure them (the claims are still listed).
    ``margin``: the latest-read and list claims hold their upper quartile to
    their limit times this (``Results.claim``'s ``spread_bound``), not to the limit.
    """

    def spread_of(bound: float) -> float | None:
        return None if margin is None else round(bound * margin, 4)

    mid, long = cfg.mid_thread, cfg.long_thread
    section = "postgres" if group.startswith("postgres") else "saver"
    latest, floor = f"{group}.latest", f"{group}.latest.floor"
    for size, n in (("mid", mid), ("long", long)):
        if size not in bounds:
            continue
        res.claim(
            f"{group}.latest.{size}",
            f"{where}: latest read at {n:,} checkpoints, {ours} / {peer}",
            f"{latest}.{ours}.{n}",
            f"{latest}.{peer}.{n}",
            bounds[size],
            section=section,
            floor=f"{floor}.{n}",
            reason=reason,
            floor_label=f"{where}: latest read at {n:,} checkpoints, {ours}",
            spread_bound=spread_of(bounds[size]),
        )
    res.claim(
        f"{group}.latest.flat",
        f"{where}: latest read, {ours} at {long:,} checkpoints / at {mid:,}",
        f"{latest}.{ours}.{long}",
        f"{latest}.{ours}.{mid}",
        bounds["flat"],
        section=section,
        floor=(f"{floor}.{long}", f"{floor}.{mid}"),
        reason=reason,
        floor_label=f"{where}: growth of {ours}'s latest read from {mid:,} to {long:,}",
    )
    res.claim(
        f"{group}.list.long",
        f"{where}: list(limit=10) at {long:,} checkpoints, {ours} / {peer}",
        f"{group}.list10.{ours}.{long}",
        f"{group}.list10.{peer}.{long}",
        bounds["list"],
        section=section,
        floor=f"{group}.list10.floor.{long}",
        reason=reason,
        floor_label=f"{where}: list(limit=10) at {long:,} checkpoints, {ours}",
        spread_bound=spread_of(bounds["list"]),
    )
