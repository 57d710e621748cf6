"""Readable text for each view: aligned tables, ids in full where a command takes them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from swarmstate._cli.values import CUT, message_text, short, value_change

__all__ = [
    "escaped",
    "plural",
    "render_check",
    "render_diff",
    "render_history",
    "render_inspect",
    "render_prune",
    "render_show",
    "render_threads",
    "table",
    "terminal_safe",
    "to_json",
]

_ROOT = "(root)"


def to_json(doc: dict[str, Any]) -> str:
    """The ``--json`` form: ASCII-safe, so any terminal or pipe can carry it."""
    return json.dumps(doc, indent=2, default=str)


def escaped(text: str) -> str:
    """``text`` with every character a terminal acts on written as its Python escape.

    C0 and C1 controls (an ANSI sequence, ``\\r``, a bell), tabs, newlines and
    line separators are stored text like any other (a node name, a channel,
    a task id) and would move the cursor, recolour or rewrite the screen.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def terminal_safe(text: str) -> str:
    """A rendered view with nothing a terminal acts on but the newlines between its lines."""
    return "\n".join(map(escaped, text.split("\n")))


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns left-aligned to their widest cell; numbers right-aligned."""
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    numeric = [
        bool(rows) and all(_is_number(r[i]) or r[i] in ("", None) for r in rows)
        for i in range(len(headers))
    ]

    def line(values: Sequence[str]) -> str:
        out = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return "  ".join(out).rstrip()

    return "\n".join([line(headers), *(line(r) for r in cells)])


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cell(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return escaped(str(value))


def _ns(checkpoint_ns: str) -> str:
    return checkpoint_ns or _ROOT


def _tail(checkpoint_id: str | None) -> str | None:
    """The random end of an id, enough to tell a parent apart in a table."""
    return None if checkpoint_id is None else "…" + checkpoint_id[-12:]


def _when(ts: str | None) -> str | None:
    """A checkpoint's ISO time (LangGraph writes UTC) to the second, for a table."""
    return None if ts is None else ts[:19].replace("T", " ")


def _shown(text: str) -> str:
    return text if text.isprintable() else repr(text)


def plural(count: int, noun: str) -> str:
    """``1 entry``, ``2 entries``, ``0 namespaces``: a count with its noun."""
    if count == 1:
        return f"{count:,} {noun}"
    if noun.endswith("y") and noun[-2:-1] not in "aeiou":
        return f"{count:,} {noun[:-1]}ies"
    return f"{count:,} {noun}s"


def render_threads(doc: dict[str, Any]) -> str:
    total, offset, shown = doc["total"], doc["offset"], len(doc["threads"])
    if not shown:
        if offset == 0:
            return "no LangGraph threads in this store"
        if total is None:
            return f"no threads at --offset {offset:,} (--count says how many there are)"
        return f"no threads at --offset {offset:,}: the store has {plural(total, 'thread')}"
    rows = []
    for t in doc["threads"]:
        names = [_ns(ns) for ns in t["namespaces"]]
        listed = ", ".join(names[:2]) + (f" +{len(names) - 2}" if len(names) > 2 else "")
        rows.append(
            [
                _shown(t["thread_id"]),
                t["checkpoints"],
                listed,
                _when(t["last_activity"]),
                t["value_bytes"],
            ]
        )
    headers = ["THREAD", "CHECKPOINTS", "NAMESPACES", "LAST ACTIVITY (UTC)", "VALUE BYTES"]
    lines = [table(headers, rows)]
    last = offset + shown
    of = "" if total is None else f" of {total:,}"
    summary = f"threads {offset + 1:,}-{last:,}{of}, newest activity first"
    if doc["more"]:
        summary += f" (next page: --offset {last})"
    lines.append(summary)
    return "\n".join(lines)


def render_history(doc: dict[str, Any]) -> str:
    rows = doc["checkpoints"]
    with_ns = any(r["checkpoint_ns"] for r in rows)
    forked = any(r["branch"] for r in rows)
    headers = ["CHECKPOINT", *(["NAMESPACE"] if with_ns else []), *(["BRANCH"] if forked else [])]
    headers += ["STEP", "SOURCE", "NODES", "PARENT", "BYTES", "WRITES", "TIME (UTC)"]
    body = [
        [
            r["checkpoint_id"],
            *([_ns(r["checkpoint_ns"])] if with_ns else []),
            *([r["branch"]] if forked else []),
            r["step"],
            r["source"],
            ",".join(r["nodes"]) or None,
            _tail(r["parent_id"]),
            r["bytes"],
            r["pending_write_count"],
            _when(r["ts"]),
        ]
        for r in rows
    ]
    title = f"thread {_shown(doc['thread_id'])}, newest first"
    if forked:
        title += "; BRANCH 0 leads to the newest checkpoint, other numbers are forks"
    return title + "\n" + table(headers, body)


def render_show(doc: dict[str, Any]) -> str:
    lines = [
        f"thread {_shown(doc['thread_id'])}  checkpoint {escaped(doc['checkpoint_id'])}  "
        f"namespace {escaped(_ns(doc['checkpoint_ns']))}",
        f"step {doc['step']}  source {escaped(str(doc['source']))}  "
        f"nodes {escaped(','.join(doc['nodes'])) or '-'}  "
        f"parent {escaped(doc['parent_id'] or '-')}  {escaped(str(doc['ts']))}",
        f"next {escaped(', '.join(doc['next'])) or '- (nothing left to run)'}",
        f"metadata {short(json.dumps(doc['metadata'], default=str, ensure_ascii=False), 200)}",
    ]
    for found in doc["interrupts"]:
        lines.append(
            f"interrupt (task {escaped(str(found['task_id']))}): {short(found['value'], 200)}"
        )
    lines.append("")
    rows: list[list[object]] = []
    for ch in doc["channels"]:
        summary = ch["summary"]
        if ch["delta"] is not None:
            summary = f"{summary}  [{_delta(ch['delta'])}]"
        rows.append([ch["name"], ch["type"], ch["bytes"], summary])
        for m in ch["last_messages"]:
            rows.append(["", "", "", f"  {message_text(m)}"])
    lines.append(table(["CHANNEL", "TYPE", "BYTES", "SUMMARY"], rows) if rows else "no channels")
    writes = doc["pending_writes"]
    lines.append("")
    if writes:
        body = [[w["task_id"], w["channel"], w["bytes"], w["summary"]] for w in writes]
        lines.append(table(["PENDING WRITE (TASK)", "CHANNEL", "BYTES", "SUMMARY"], body))
    else:
        lines.append("no pending writes")
    return _with_cut_note("\n".join(lines))


def _delta(delta: dict[str, Any]) -> str:
    """How a DeltaChannel's value was read, in words."""
    if delta["writes"] == 0:
        return "DeltaChannel: snapshot" if delta["snapshot"] else "DeltaChannel: empty"
    start = "snapshot" if delta["snapshot"] else "empty"
    writes = f"{delta['writes']:,} write{'' if delta['writes'] == 1 else 's'}"
    if delta["reducer"] is None:
        return f"DeltaChannel: {start}, {writes} not folded (the graph's reducer is unknown)"
    return f"DeltaChannel: {start} + {writes} by {delta['reducer']}"


def _with_cut_note(text: str) -> str:
    if CUT in text:
        text += f"\n({CUT} marks a value cut to fit; --json prints every value whole)"
    return text


def render_diff(doc: dict[str, Any]) -> str:
    a, b = doc["a"], doc["b"]
    lines = [
        f"thread {_shown(doc['thread_id'])}",
        f"  from {escaped(a['checkpoint_id'])} (step {a['step']}, "
        f"{escaped(_ns(a['checkpoint_ns']))})",
        f"  to   {escaped(b['checkpoint_id'])} (step {b['step']}, "
        f"{escaped(_ns(b['checkpoint_ns']))})",
    ]
    channels = doc["channels"]
    for what in ("added", "removed", "changed"):
        lines.append(f"channels {what}: {escaped(', '.join(channels[what])) or '-'}")
    for name, change in doc["values"].items():
        shown = escaped(name)
        if name in channels["added"]:
            lines.append(f"  {shown} = {short(change['new'], 120)}")
        elif name in channels["removed"]:
            lines.append(f"  {shown} was {short(change['old'], 120)}")
        else:
            lines.append(f"  {shown}: {value_change(change['old'], change['new'])}")
    for name, change in doc["messages"].items():
        counts = ", ".join(f"{len(change[k])} {k}" for k in ("added", "removed", "changed"))
        lines.append(f"messages in {escaped(name)}: {counts}")
        for k, mark in (("added", "+"), ("removed", "-"), ("changed", "~")):
            lines += [f"  {mark} {message_text(m)}" for m in change[k]]
    return _with_cut_note("\n".join(lines))


def render_inspect(doc: dict[str, Any], target: str) -> str:
    lines = [
        f"{target}: {plural(doc['entries'], 'entry')} in "
        f"{plural(doc['namespace_count'], 'namespace')}",
        *(f"  {n['namespace']!r}: {n['entries']:,}" for n in doc["namespaces"]),
    ]
    more = doc["namespace_count"] - len(doc["namespaces"])
    if more > 0:
        lines.append(f"  ... {more:,} more (use --limit)")
    lines.append(plural(doc["snapshot_count"], "snapshot"))
    for s in doc["snapshots"]:
        lines.append(
            f"  #{s['id']} parent={s['parent']} {_when(s['timestamp'])} UTC "
            f"entries={s['entries']:,} bytes={s['bytes']:,}"
        )
    return "\n".join(lines)


def render_check(doc: dict[str, Any], target: str) -> str:
    integrity = doc["integrity_check"]
    lines = [
        "integrity check: "
        + ("not applicable (not a SQLite file)" if integrity is None else "; ".join(integrity)),
        f"entries decoded: {doc['entries']:,}, bad: {len(doc['bad_entries']):,}",
    ]
    lines += [
        f"  {b['namespace']!r} {b['key']!r}: {escaped(b['error'])}" for b in doc["bad_entries"]
    ]
    if doc["threads_checked"] is not None:
        bad = doc["bad_checkpoints"]
        lines.append(
            f"LangGraph threads read back: {doc['threads_checked']:,}, "
            f"bad checkpoints: {len(bad):,}"
        )
        lines += [f"  {escaped(b['error'])}" for b in bad]
        other = doc.get("other_serializer_checkpoints") or []
        if other:
            lines.append(
                f"checkpoints written by another serializer (not read here, not counted "
                f"as damage): {len(other):,}; {escaped(other[0]['error'])}"
            )
    lines.append(f"{target}: {'ok' if doc['ok'] else 'PROBLEMS FOUND'}")
    return "\n".join(lines)


def render_prune(doc: dict[str, Any], path: str) -> str:
    """What ``prune`` deleted (or would), and with ``--reclaim`` what the store gave back."""
    done = "would delete (dry run: nothing was changed)" if doc["dry_run"] else "deleted"
    rows: list[list[object]] = [
        ["threads examined", doc["threads_examined"]],
        ["threads deleted", doc["threads_deleted"]],
        ["checkpoints deleted", doc["checkpoints_deleted"]],
        ["pending writes deleted", doc["writes_deleted"]],
        ["store bytes freed, keys and overhead included", doc["bytes_freed"]],
    ]
    reclaimed = doc["reclaim"]
    if reclaimed is not None:
        rows += [
            ["store bytes before reclaim", reclaimed["bytes_before"]],
            ["store bytes after reclaim", reclaimed["bytes_after"]],
            ["pages given back", reclaimed["pages_freed"]],
        ]
    text = f"prune {_shown(path)}: {done}\n" + table(["WHAT", "COUNT"], rows)
    if reclaimed is not None and reclaimed["note"]:
        text += f"\nreclaim: {reclaimed['note']}"
    return text
