"""The named blocks of figures other docs quote, each rendered from one results document.

Each block lives in one file under docs/ between ``<!-- results:NAME:begin -->``
and ``<!-- results:NAME:end -->``. The prose around a block stays qualitative
and cites row ids; every figure is here. Sizes (the longest thread, the
largest store) are read from the run's settings, so a quick run's file
renders the same blocks at its own sizes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.tables.markdown import (
    Fig,
    Ratio,
    claim_tables,
    figures,
    fmt,
    metric,
    pairs,
    size,
    table,
    times,
)
from benchmarks.tables.sections import shape_grid, thread_rows

_STORE = "SwarmStateSaver(Store)"
_DISK = "SwarmStateSaver(DiskStore NORMAL)"
_DISK_FULL = "SwarmStateSaver(DiskStore FULL)"
_PG = "SwarmStateSaver(PostgresStore)"
_SHIPPED = "SqliteSaver shipped"

F, R = Fig, Ratio
_SNAP, _DEEP = "core.snapshot.Store", "core.snapshot.deepcopy"
_SET10K = "disk.set10k"


@dataclass(frozen=True)
class _ReportSizes:
    """The sizes one results file was measured at."""

    long: int
    mid: int
    short: int
    snap_small: int
    snap_big: int
    deep: int
    few_ns: int
    many_ns: int
    small_keys: int
    big_keys: int
    disk_small: int
    disk_big: int
    threads: int
    writers: int


def _sizes(doc: dict[str, Any]) -> _ReportSizes:
    s = doc["environment"]["settings"]
    lengths, snaps, disks = s["thread_lengths"], s["snapshot_sizes"], s["disk_sizes"]
    return _ReportSizes(
        long=max(lengths),
        mid=s.get("mid_thread", 50),
        short=min(lengths),
        snap_small=min(snaps),
        snap_big=max(snaps),
        deep=s.get("deepcopy_size", 50_000),
        few_ns=s["diff_namespaces"][0],
        many_ns=s["diff_namespaces"][1],
        small_keys=s["diff_keys"][0],
        big_keys=s["diff_keys"][1],
        disk_small=min(disks),
        disk_big=max(disks),
        threads=max(t for t in s["thread_counts"] if t <= 4),
        writers=max(s["writer_counts"]),
    )


def _perf_store(doc: dict[str, Any]) -> list[str]:
    z, m = _sizes(doc), "median"
    big, small, deep = z.snap_big, z.snap_small, z.deep
    few, many = f"ns{z.few_ns}", f"ns{z.many_ns}"
    one_small, one_big = f"one{z.small_keys}", f"one{z.big_keys}"
    t = z.threads
    return figures(
        doc,
        [
            F(
                f"`snapshot()`, {small:,} entries, nothing written since the last",
                f"{_SNAP}.{small}",
            ),
            F(f"`snapshot()`, {big:,} entries, same", f"{_SNAP}.{big}"),
            F(f"`copy.deepcopy` of {deep:,} entries", f"{_DEEP}.{deep}"),
            R(f"deepcopy / snapshot, {deep:,} entries", f"{_DEEP}.{deep}", f"{_SNAP}.{deep}"),
            F(f"`diff`, 1 change, {z.few_ns:,} namespaces", f"core.diff.1.{few}"),
            F(f"`diff`, 1 change, one namespace of {z.big_keys:,} keys", f"core.diff.1.{one_big}"),
            F(f"`diff`, 100 changes, {z.few_ns:,} namespaces", f"core.diff.100.{few}"),
            F(
                f"`diff`, 100 changes, one namespace of {z.big_keys:,} keys",
                f"core.diff.100.{one_big}",
            ),
            F(
                f"`set`, small dict, one namespace of {z.small_keys:,} keys",
                f"core.set.{one_small}",
            ),
            F(f"`set`, small dict, {z.many_ns:,} namespaces", f"core.set.{many}"),
            F("`set` + `get` pairs", "core.setget.Store", m),
            F("plain dict holding the same codec bytes", "core.setget.dict", m),
            R("Store / plain dict", "core.setget.Store", "core.setget.dict", m),
            F("`set` + `get`, 1 thread", "core.threads.1", m),
            R(f"{t} threads / 1 thread (total)", f"core.threads.{t}", "core.threads.1", m),
            R("`set_many` (50) / single `set`", "core.set_many.50", "core.set_many.single", m),
        ],
    )


def _perf_disk(doc: dict[str, Any]) -> list[str]:
    z = _sizes(doc)
    normal, full = f"{_SET10K}.DiskStore.NORMAL", f"{_SET10K}.DiskStore.FULL"
    small, big = z.disk_small, z.disk_big
    return figures(
        doc,
        [
            F("10 kB `set`, NORMAL", normal),
            R("… / bare apsw `INSERT OR REPLACE`, NORMAL", normal, f"{_SET10K}.bare.NORMAL"),
            F("10 kB `set`, FULL", full),
            R("… / bare apsw, FULL", full, f"{_SET10K}.bare.FULL"),
            R("FULL / NORMAL (the fsync)", full, normal),
            F(f"`snapshot()`, {small:,} entries", f"disk.snapshot.{small}"),
            F(f"`snapshot()`, {big:,} entries", f"disk.snapshot.{big}"),
            F(f"`diff` after 1 change, {big:,} entries", f"disk.diff.1.{big}"),
            F(f"`diff` after 100 changes, {big:,} entries", f"disk.diff.100.{big}"),
            F(f"`restore` after 1 change, {big:,} entries", f"disk.restore.1.{big}"),
            F(f"`restore` after 100 changes, {small:,} entries", f"disk.restore.100.{small}"),
            F(f"`restore` after 100 changes, {big:,} entries", f"disk.restore.100.{big}"),
            F("… its p99", f"disk.restore.100.{big}", "p99"),
            F("1 spawned writer process", "disk.writers.1", "median"),
            F(f"{z.writers} writer processes, total", f"disk.writers.{z.writers}", "median"),
            F(
                f"{z.writers} writers: efficiency (total / {z.writers} x one)",
                f"disk.writers.{z.writers}",
                "efficiency",
            ),
        ],
    )


def _saver_items(
    z: _ReportSizes, group: str, ours: str, peer: str, peer_put: str = ""
) -> list[Fig | Ratio]:
    peer_put = peer_put or peer
    latest, lst, long, mid = f"{group}.latest", f"{group}.list10", z.long, z.mid
    return [
        F(f"latest read, {mid:,} checkpoints, {ours}", f"{latest}.{ours}.{mid}"),
        F(f"latest read, {long:,} checkpoints, {ours}", f"{latest}.{ours}.{long}"),
        F(f"latest read, {long:,} checkpoints, {peer}", f"{latest}.{peer}.{long}"),
        R(
            f"ours at {long:,} / ours at {mid:,}",
            f"{latest}.{ours}.{long}",
            f"{latest}.{ours}.{mid}",
        ),
        F(f"`list(limit=10)` at {long:,}, {ours}", f"{lst}.{ours}.{long}"),
        R(f"… / {peer}", f"{lst}.{ours}.{long}", f"{lst}.{peer}.{long}"),
        F(f"`put`, {ours}", f"{group}.put.{ours}"),
        R(f"… / {peer_put}", f"{group}.put.{ours}", f"{group}.put.{peer_put}"),
        F(f"`put_writes` (one task's writes), {ours}", f"{group}.put_writes.{ours}"),
        R(f"… / {peer_put}", f"{group}.put_writes.{ours}", f"{group}.put_writes.{peer_put}"),
    ]


def _perf_saver(doc: dict[str, Any]) -> list[str]:
    z = _sizes(doc)
    full, shipped = f"durable.put.{_DISK_FULL}", f"durable.put.{_SHIPPED}"
    items = _saver_items(z, "memory", _STORE, "InMemorySaver")
    items += _saver_items(z, "durable", _DISK, _SHIPPED, "SqliteSaver NORMAL")
    items += [F(f"`put`, {_DISK_FULL}", full), R(f"… / {_SHIPPED} (FULL)", full, shipped)]
    items += _saver_items(z, "postgres", _PG, "PostgresSaver")
    return figures(doc, items)


# Why a claim is missed (or its limit is below the floor), where we know; by claim id.
_DECODE = (
    "LangGraph's serializer decoding the same checkpoints and writes, with no store at "
    "all (the floor), is most of the call; every saver does that decode"
)
_HISTORY = (
    "each read decodes 20 checkpoints of an 800-message chat: LangGraph's serializer "
    "validates every message of each in the peer; ours rebuilds the messages it has read "
    "twice, so the median is well below the limit"
)
_GET_STATE = (
    "most of the call is decoding an 800-message state: the peer validates every "
    "message, ours rebuilds the messages it has read twice"
)
_FIRST_READ = (
    "a checkpointer's first read pays the serializer's decode of every message, as the "
    "peer does, and what our layout adds: the value's chunks are read and joined "
    "(the peer reads one blob) and each message is looked up in the rebuild cache; from "
    "the third read the same call costs a fraction of the peer's (the get_state claim)"
)
_PUT_ROWS = (
    "on top of the floor (encode what changed, one bare INSERT) our one statement also "
    "checks the thread's guard (the several-workers condition) and writes two rows, the "
    "checkpoint's record with its two tag index entries and a chunk of the new bytes "
    "(every few puts a merged one too), where the peer writes one; at NORMAL the commit "
    "is cheap enough for that to show"
)
_GROWTH_PUT = (
    "the median is within the limit, the upper quartile just above it, in a run on a "
    "loaded machine: every saver's put, the peers' too, took far longer than in the other "
    "full run of this layout, where the claim held with room to spare. Ours is CPU work "
    "(each message keyed by its content to find the unchanged ones, the new ones encoded, "
    "one write), the peer's mostly encoding and writing the whole list; ours slowed more"
)
_SERVER_LAG = (
    "the loop is saturated in this closed loop: each user starts its next turn as soon as "
    "one ends, and ours ends turns sooner (the throughput claim), so more tasks are ready "
    "in each pass of the loop and the ticker waits for all of them. The same rows measure "
    "it: `loop_busy` (the loop thread's CPU over the wall time) is near 1 for ours and "
    "well below it for the peer, which waits on its server, while `loop_cpu` (the loop "
    "thread's CPU per turn) is a little above the peer's. The saver's own pieces on the loop "
    "are short (timed between awaits, issue #39's note); at the same offered load "
    "(`--open-load`, an open loop) the lag was within the limit in the last such run"
)
_SERVER_LAG_DISK = (
    "not the loop's own work: the loop thread's CPU per turn (`loop_cpu`) is below the "
    "peer's and its share of the wall time (`loop_busy`) close to the peer's. DiskStore's "
    "calls run in worker threads, and the Python around each SQLite call holds the "
    "interpreter there, which the loop's CPU time does not count; that the loop waits for "
    "it is the likely cause, not yet measured"
)
WHY = {
    "memory.put": "the peer's put is a few dict assignments of per-channel blobs; ours "
    "also compares each changed value's bytes with its previous version's, stores what "
    "is new as a chunk, and writes the record through one store transaction (its "
    "conditions checked, its tags kept)",
    "memory.latest.mid": _DECODE,
    "memory.latest.long": _DECODE + "; the peer's read grows only a little with the thread",
    "memory.list.long": _DECODE,
    "durable.put.normal": _PUT_ROWS,
    "durable.put.normal_vs_shipped": "the shipped peer fsyncs every commit, ours at NORMAL "
    "does not; the bare write at NORMAL (the floor) is already above the limit",
    "durable.put.full": "both fsync every commit; the rest is the NORMAL row's extra work "
    "(the guard's condition, the record's two tag index entries, the chunk of new "
    "bytes); the stream keeps a window of 24 messages (about "
    "10 kB), so writing only the new ones saves little against the peer's whole blob",
    "durable.latest.mid": _DECODE + "; above it, ours reads the entry with its pending "
    "writes and then the value's chunks",
    "durable.latest.long": _DECODE + "; above it, ours reads the entry with its pending "
    "writes and then the value's chunks",
    "durable.list.long": _DECODE,
    "postgres.latest.long": "one round trip and the decode are the floor; the peer's read "
    "grows with the thread, ours does not",
    "postgres.list.long": "one round trip and the decode are the floor",
    "postgres.put": "one round trip each; the server's commit dominates both",
    "disk.restore.flat.100": "SQLite itself (the floor: the same keys rewritten bare) "
    "grows about as much between these sizes: the changed rows and index pages are "
    "scattered in a large file and mostly shared in a small one",
    f"growth.bytes.{_PG}": "on PostgreSQL each of the many small rows sharing makes "
    "(checkpoint entries with LangGraph's version maps, pending writes, chunks) also "
    "pays a tuple header and an entry in the (ns, key) index, whose pages stay half full "
    "where a thread's namespaces insert in the middle of it. Large messages and the "
    "checkpoint entries are stored compressed there (compress=True); each checkpoint's "
    "two tag index entries (its order across threads, its run) have nothing to deflate",
    **{f"growth.history20.{ours}": _HISTORY for ours in (_STORE, _DISK, _DISK_FULL, _PG)},
    **{f"growth.get_state.{ours}": _GET_STATE for ours in (_STORE, _DISK, _DISK_FULL, _PG)},
    **{f"growth.get_state_first.{ours}": _FIRST_READ for ours in (_STORE, _DISK, _DISK_FULL, _PG)},
    **{f"growth.put.{ours}": _GROWTH_PUT for ours in (_DISK_FULL, _PG)},
    "growth.delta.put": "with DeltaChannel both puts are small. The peer's is one INSERT "
    "of a few hundred bytes and a commit. Ours is one statement that writes one row, the "
    "checkpoint's record, with its two tags (entries in two partial indexes: what "
    "list(None), the threads page and delete_for_runs read, so that they cost the page "
    "and not the number of threads), and checks two conditions, the thread's guard and "
    "that the checkpoint it builds on still exists. The index entries land in other parts "
    "of the file than the row: more pages in each commit's log. They and the conditions "
    "put ours above the peer here; the per-turn ratio spreads widely on a loaded machine",
    "core.threads.scaling": "four threads on the machine's two cores, shared with other "
    "work: one Store's total set+get rate stays about flat from one thread to four (the "
    "GIL serializes the Python of each call); the bound asks that it not fall below 0.8, "
    "which the lower quartile touches when another tenant takes a core",
    "postgres.latest.flat": "one round trip and the decode are most of both reads; the "
    "ratio between two sizes of one saver is noise-bound on a shared server (each round "
    "trip waits for the server's process to be scheduled)",
    **{
        f"server.{store}.u{users}.lag_p99": _SERVER_LAG if store == "postgres" else _SERVER_LAG_DISK
        for store in ("disk", "postgres")
        for users in (16, 64)
    },
    "growth.delta.history20": "LangGraph rebuilds each DeltaChannel value by replaying "
    "the writes since its last snapshot through the graph's reducer, for every checkpoint "
    "of the page, whichever saver returns them: most of the call. Our part, reading the "
    "chain (a page of keys, then the rows not met before) and decoding its writes and the "
    "snapshot it starts from (fresh objects for every checkpoint), is what is faster",
}


# Reasons shared by the claims of the shapes and threads sections, keyed by
# (section, call, store) with "*" for any; the shape is in the claim's label.
_SHAPE_PUT_MEMORY = (
    "the peer's put serializes the changed channels and assigns them in dicts; ours also "
    "compares each changed value's bytes with its previous version's (what is shared) "
    "and writes the record through one store transaction, its guard a condition, its "
    "tags kept: a fixed cost per put that is large next to a dict assignment, not a cost "
    "that grows with the thread. Taking the comparison, the item memo and the class check "
    "out of the put leaves most of the ratio: the rest is the write path's Python, spread "
    "over many small steps (issue #38's note)"
)
_SHAPE_PUT_DURABLE = (
    "both puts are the serializer and one commit; ours writes the checkpoint's record "
    "with its two tag index entries and the chunk of new bytes, the thread's guard a "
    "condition in the same statement, where the peer writes its blobs: near parity, on "
    "the limit's either side from run to run"
)
_SHAPE_FIRST_READ = (
    "a saver that has read nothing yet reads one row per chunk the state references, "
    "cold, where the peer reads one blob per channel, then both decode the same bytes; "
    "its warm reads (the get_state claim) are at or below the peer's"
)
_SHAPE_READ = (
    "most of the read is decoding the state with the serializer, as in the peer; ours "
    "first joins the value's chunks (slices of bytes already read)"
)
_SHAPE_INVOKE = (
    "an invoke is the graph's own work plus its puts and reads: it follows the put and "
    "get_state claims of the same shape and store"
)
_PATTERNS: dict[tuple[str, str, str], str] = {
    ("shapes", "put", "memory"): _SHAPE_PUT_MEMORY,
    ("shapes", "put", "*"): _SHAPE_PUT_DURABLE,
    ("shapes", "get_state_new", "*"): _SHAPE_FIRST_READ,
    ("shapes", "get_state", "*"): _SHAPE_READ,
    ("shapes", "list10", "*"): _SHAPE_READ,
    ("shapes", "invoke", "*"): _SHAPE_INVOKE,
    ("threads", "delete_thread", "postgres"): "one statement on a thread never claimed: "
    "the tombstone and the thread's range (one DELETE and one UPDATE). The peer's is three "
    "DELETEs by thread id; ours also locks and updates the store's meta row (the version "
    "rows are stamped with, the running totals), as every write does, and writes the "
    "guard row: the server's time for that statement is most of the difference",
    ("threads", "first_put", "*"): "the registry and activity rows a new thread's first "
    "put wrote are gone (the record's tags replace them); what is left above the peer "
    "is not analysed yet",
}


def why(claim_id: str) -> str:
    """What a missed claim's analysis says: its own entry, else its section's pattern."""
    if claim_id in WHY:
        return WHY[claim_id]
    parts = claim_id.split(".")
    if parts[0] == "shapes" and len(parts) == 4:  # shapes.<shape>.<call>.<store>
        section, call, store = parts[0], parts[2], parts[3]
    elif parts[0] == "threads" and len(parts) >= 3:  # threads.<store>.<call>[.<which>]
        section, store, call = parts[0], parts[1], parts[2]
    else:
        return "not analysed yet"
    for key in ((section, call, store), (section, call, "*")):
        if key in _PATTERNS:
            return _PATTERNS[key]
    return "not analysed yet"


def _missed(doc: dict[str, Any]) -> list[str]:
    claims = doc["claims"]
    open_ = [c for c in claims if c.get("holds") is not True]
    if not open_:
        return ["Every claim holds in this run."]
    held = sum(1 for c in claims if c.get("holds") is True)
    out = [f"{held} of {len(claims)} claims hold in this run; the others:", ""]
    out += claim_tables(open_, rows=True)
    reasons = [
        [c["label"], why(c["id"].removesuffix(".floor"))]
        for c in open_
        if c.get("verdict") != "not measured"
    ]
    if reasons:
        out += ["", "Why, where we know:", ""]
        out += table(["claim", "why"], reasons)
    return out


def _noise(doc: dict[str, Any], top: int = 8) -> list[str]:
    rows = doc["rows"]
    tails = [(r["p99"] / r["p50"], rid) for rid, r in rows.items() if r.get("p50") and r.get("p99")]
    tails.sort(reverse=True)
    lines = [
        [f"`{rid}`", fmt(rows[rid]["p50"], "p50"), fmt(rows[rid]["p99"], "p99"), times(ratio)]
        for ratio, rid in tails[:top]
    ]
    out = [f"Latency rows with the widest tail (p99 / p50), top {top}:", ""]
    out += table(["row", "p50", "p99", "p99 / p50"], lines)
    claims = [
        ((c["q3"] - c["q1"]) / c["ratio"], c) for c in doc["claims"] if c.get("ratio") and c["q1"]
    ]
    claims.sort(key=lambda pair: pair[0], reverse=True)
    lines = [
        [c["label"], f"{c['ratio']:.3g}", f"{c['q1']:.3g}-{c['q3']:.3g}", f"{width:.0%}"]
        for width, c in claims[:top]
    ]
    out += ["", f"Claims with the widest spread between rounds, top {top}:", ""]
    out += table(["claim", "ratio", "spread", "spread / ratio"], lines)
    return out


def _envelope(doc: dict[str, Any]) -> list[str]:
    env = doc["environment"]
    pg = next((r for r in doc["rows"].values() if r.get("saver_group") == "postgres"), None)
    return [
        f"- Python {env['python']} ({env['implementation']}), {env['platform']}",
        f"- {env['cpu_count']} CPUs ({env.get('cpus_usable')} usable by the run), "
        f"{env.get('cpu_mhz') or '?'} MHz, {env.get('memory_total_mb') or 0:,} MB RAM",
        "- a 10 kB committed write with an fsync of the WAL (bare apsw, FULL): "
        f"{fmt(metric(doc, 'disk.set10k.bare.FULL', 'p50'), 'p50')} "
        "(`disk.set10k.bare.FULL`), without it (NORMAL): "
        f"{fmt(metric(doc, 'disk.set10k.bare.NORMAL', 'p50'), 'p50')} "
        "(`disk.set10k.bare.NORMAL`)",
        f"- PostgreSQL rows: {pg['fsync'] if pg else 'not measured'}, same host",
    ]


def _disk_costs(doc: dict[str, Any]) -> list[str]:
    z = _sizes(doc)
    a, b = z.disk_small, z.disk_big
    grid = pairs(
        doc,
        (f"{a:,} entries", f"{b:,} entries"),
        [
            ("`snapshot()`, back to back", f"disk.snapshot.{a}", f"disk.snapshot.{b}"),
            ("`diff` after 1 change", f"disk.diff.1.{a}", f"disk.diff.1.{b}"),
            ("`restore` after 1 change", f"disk.restore.1.{a}", f"disk.restore.1.{b}"),
            ("`diff` after 100 changes", f"disk.diff.100.{a}", f"disk.diff.100.{b}"),
            ("`restore` after 100 changes", f"disk.restore.100.{a}", f"disk.restore.100.{b}"),
        ],
    )
    floor = pairs(
        doc,
        ("bare apsw", "DiskStore.set"),
        [
            ("10 kB write, NORMAL", "disk.set10k.bare.NORMAL", "disk.set10k.DiskStore.NORMAL"),
            ("10 kB write, FULL", "disk.set10k.bare.FULL", "disk.set10k.DiskStore.FULL"),
        ],
    )
    full, normal = f"{_SET10K}.DiskStore.FULL", f"{_SET10K}.DiskStore.NORMAL"
    w = z.writers
    fsync = figures(
        doc,
        [
            R("DiskStore 10 kB write, FULL / NORMAL", full, normal),
            F(f"{w} spawned writers on one file, total", f"disk.writers.{w}", "median"),
            R("… / 1 writer", f"disk.writers.{w}", "disk.writers.1", "median"),
        ],
    )
    return [*grid, "", *floor, "", *fsync]


def _langgraph(doc: dict[str, Any]) -> list[str]:
    z = _sizes(doc)
    grid: list[tuple[str, str, str]] = []
    for group, ours, peer in (
        ("memory", _STORE, "InMemorySaver"),
        ("durable", _DISK, _SHIPPED),
        ("postgres", _PG, "PostgresSaver"),
    ):
        for saver in (ours, peer):
            latest = f"{group}.latest.{saver}"
            grid.append((f"latest read, {saver}", f"{latest}.{z.mid}", f"{latest}.{z.long}"))
    out = pairs(doc, (f"{z.mid:,} checkpoints", f"{z.long:,} checkpoints"), grid)
    items: list[Fig | Ratio] = []
    for group, ours, peer in (
        ("memory", _STORE, "InMemorySaver"),
        ("durable", _DISK, "SqliteSaver NORMAL"),
        ("durable", _DISK_FULL, _SHIPPED),
        ("postgres", _PG, "PostgresSaver"),
    ):
        items += [
            Fig(f"`put`, {ours}", f"{group}.put.{ours}"),
            Ratio(f"… / {peer}", f"{group}.put.{ours}", f"{group}.put.{peer}"),
        ]
    for group, ours, peer in (
        ("memory", _STORE, "InMemorySaver"),
        ("durable", _DISK, _SHIPPED),
        ("postgres", _PG, "PostgresSaver"),
    ):
        lst = f"{group}.list10"
        items.append(
            R(
                f"`list(limit=10)` at {z.long:,}, {ours} / {peer}",
                *(f"{lst}.{w}.{z.long}" for w in (ours, peer)),
            )
        )
    return [*out, "", *figures(doc, items)]


def _postgres(doc: dict[str, Any]) -> list[str]:
    z = _sizes(doc)
    latest, lst, long = "postgres.latest", "postgres.list10", z.long
    return figures(
        doc,
        [
            Fig("`put` (one write transaction)", f"postgres.put.{_PG}"),
            Fig("`put`, PostgresSaver", "postgres.put.PostgresSaver"),
            Fig("`put_writes` (one task's writes)", f"postgres.put_writes.{_PG}"),
            Fig(f"latest read, {z.short:,} checkpoints", f"{latest}.{_PG}.{z.short}"),
            Fig(f"latest read, {long:,} checkpoints", f"{latest}.{_PG}.{long}"),
            Fig(f"latest read, {long:,}, PostgresSaver", f"{latest}.PostgresSaver.{long}"),
            Fig(f"`list(limit=10)` at {long:,}", f"{lst}.{_PG}.{long}"),
            Fig(f"`list(limit=10)` at {long:,}, PostgresSaver", f"{lst}.PostgresSaver.{long}"),
        ],
    )


def _architecture(doc: dict[str, Any]) -> list[str]:
    t = _sizes(doc).threads
    lock, nolock = "design.threads.lock", "design.threads.nolock"
    return figures(
        doc,
        [
            Fig("`Snapshot.diff`, 1 change in 10,000 entries", "design.diff1.trie.10000"),
            Fig("pyrsistent `PMap ==`, same two versions", "design.diff1.pmap_eq.10000"),
            Ratio("… PMap / trie", "design.diff1.pmap_eq.10000", "design.diff1.trie.10000"),
            Fig("pyrsistent `PVector.set`, 32 slots", "design.node.pvector_set.32"),
            Fig("copy a 32-slot list, set one slot", "design.node.list_copy.32"),
            Fig("writes, one shared lock, 1 thread", f"{lock}.1", "median"),
            Ratio("… 4 threads / 1 thread", f"{lock}.4", f"{lock}.1", "median"),
            Fig("writes, no lock, 1 thread", f"{nolock}.1", "median"),
            Ratio("… 4 threads / 1 thread", f"{nolock}.4", f"{nolock}.1", "median"),
            Ratio(
                f"`Store` set+get, {t} threads / 1 thread",
                f"core.threads.{t}",
                "core.threads.1",
                "median",
            ),
        ],
    )


_GROWTH_SAVERS = (
    (_STORE, "InMemorySaver"),
    (_DISK, "SqliteSaver NORMAL"),
    (_DISK_FULL, _SHIPPED),
    (_PG, "PostgresSaver"),
)


def _growth_turns(doc: dict[str, Any]) -> int | None:
    for row in doc["rows"].values():
        if row.get("section") == "growth" and isinstance(row.get("param"), int):
            return int(row["param"])
    return None


def _growth(doc: dict[str, Any]) -> list[str]:
    turns = _growth_turns(doc)
    if turns is None:
        return ["The growth section did not run for this results file."]
    out: list[str] = []
    for graph, title in (("plain", "`add_messages`"), ("delta", "`DeltaChannel`")):
        lines = []
        for pair in _GROWTH_SAVERS:
            for saver in pair:
                row = f"growth.{graph}.%s.{saver}"
                if row % "bytes" not in doc["rows"]:
                    continue
                lines.append(
                    [
                        saver,
                        size(metric(doc, row % "bytes", "p50")),
                        *(fmt(metric(doc, row % w, "p50"), "p50") for w in _GROWTH_CALLS),
                    ]
                )
        heads = ["put", "invoke", "get_state", "history (20)", "first get_state"]
        out += [
            f"{title} graph, after {turns:,} turns (rows `growth.{graph}.*`; "
            "put and invoke: p50 over the last 10% of turns, at least 10; reads: p50 after "
            "the last; first get_state: by a new checkpointer, nothing cached):",
            "",
            *table(["saver", "stored", *heads], lines),
            "",
        ]
    items: list[Fig | Ratio] = []
    for ours, peer in _GROWTH_SAVERS:
        for what in ("bytes", "put"):
            num, den = f"growth.plain.{what}.{ours}", f"growth.plain.{what}.{peer}"
            if num in doc["rows"] and den in doc["rows"]:
                items.append(Ratio(f"{what}, {ours} / {peer}", num, den))
    return [*out, *figures(doc, items)]


_GROWTH_CALLS = ("put", "invoke", "get_state", "history20", "get_state_first")


def _retention(doc: dict[str, Any]) -> list[str]:
    disk = "retention.disk"
    if f"{disk}.bytes.before" not in doc["rows"]:
        return ["The retention section did not run for this results file."]
    threads = doc["rows"][f"{disk}.bytes.before"].get("threads")
    turns = doc["rows"][f"{disk}.bytes.before"].get("turns")
    items: list[Fig | Ratio] = []
    for backend in ("disk", "postgres"):
        b = f"retention.{backend}"
        if f"{b}.bytes.before" not in doc["rows"]:
            continue
        name = "DiskStore" if backend == "disk" else "PostgresStore"
        items += [
            Fig(f"{name}: {threads} threads x {turns} turns, stored", f"{b}.bytes.before"),
            Fig(f"{name}: after expiring the idle ones and `reclaim()`", f"{b}.bytes.after_expiry"),
            Ratio("… / before", f"{b}.bytes.after_expiry", f"{b}.bytes.before"),
            Fig(f"{name}: expiry, `bytes_freed` reported", f"{b}.expiry.reported"),
            Fig(f"{name}: expiry, given back by `reclaim()`", f"{b}.expiry.given_back"),
            Fig(f"{name}: `keep_last=2`, `bytes_freed` reported", f"{b}.keep_last.reported"),
            Fig(f"{name}: `keep_last=2`, given back", f"{b}.keep_last.given_back"),
            Ratio(
                f"{name}: after writing the expired amount again / before",
                f"{b}.bytes.after_refill",
                f"{b}.bytes.before",
            ),
            Fig(f"{name}: writer's `put`, nothing else running", f"{b}.writer.put_quiet"),
            Fig("…", f"{b}.writer.put_quiet", "p99"),
            Fig("…", f"{b}.writer.put_quiet", "max"),
            Fig(f"{name}: writer's `put` during retain + reclaim", f"{b}.writer.put_busy"),
            Fig("…", f"{b}.writer.put_busy", "p99"),
            Fig("…", f"{b}.writer.put_busy", "max"),
            Fig(f"{name}: longest step of that `reclaim()`", f"{b}.reclaim.longest_step"),
        ]
    return figures(doc, items)


def _shapes(doc: dict[str, Any]) -> list[str]:
    """The shapes section's grid of ratios, with its setup."""
    grid = shape_grid(doc["claims"])
    turns = {r["param"] for r in doc["rows"].values() if r.get("section") == "shapes"}
    if not grid or not turns:
        return ["The `shapes` section was not part of this run."]
    return [
        f"One real graph per shape, an input and three plain-Python nodes a turn, "
        f'{int(max(turns)):,} turns of seeded non-repetitive text, `durability="sync"`, '
        "ours beside its peer in lockstep (rows `shapes.<shape>.<call>.<saver>`, every row in "
        "[benchmarks.md](benchmarks.md)); put and invoke over the second half of the turns, "
        "reads after the last.",
        "",
        *grid,
    ]


def _threads(doc: dict[str, Any]) -> list[str]:
    """The many-threads tables of docs/benchmarks.md: each call at every number of threads."""
    lines, _ = thread_rows(doc["rows"])
    return lines[1:] if lines else ["The `threads` section was not part of this run."]


# name -> (file under docs/, what goes between its markers)
BLOCKS: dict[str, tuple[str, Callable[[dict[str, Any]], list[str]]]] = {
    "performance.store": ("performance.md", _perf_store),
    "performance.disk": ("performance.md", _perf_disk),
    "performance.saver": ("performance.md", _perf_saver),
    "performance.missed": ("performance.md", _missed),
    "performance.noise": ("performance.md", _noise),
    "performance.envelope": ("performance.md", _envelope),
    "disk.costs": ("disk.md", _disk_costs),
    "postgres.costs": ("postgres.md", _postgres),
    "langgraph.costs": ("langgraph.md", _langgraph),
    "architecture.design": ("architecture.md", _architecture),
    "langgraph.growth": ("langgraph.md", _growth),
    "retention.costs": ("retention.md", _retention),
    "performance.threads": ("performance.md", _threads),
    "langgraph.shapes": ("langgraph.md", _shapes),
}
