"""Where the LangGraph checkpointer keeps its data in a swarmstate store.

Every namespace the saver writes starts with :data:`ROOT`. Ids that users
choose (thread ids, checkpoint namespaces, task ids, run ids) are written as
*fields*: ``<length>:<text>,``. A field is self-delimiting, so a sequence of
fields is injective (two different id tuples never give the same string)
and prefix-free (one thread's fields are never a prefix of another
thread's): one ``namespaces(prefix)`` selects exactly one thread, whatever
characters its id holds. Nothing is ever split on a separator.

Layout (``F(x)`` is the field of ``x``, ``O(x)`` the ordered form below)::

    namespace                                  key
    langgraph:t F(thread) F(checkpoint_ns) c   O(checkpoint id) "c"            checkpoint
                                               O(checkpoint id) "w" F(task) idx  pending write
    langgraph:t F(thread) ~c                   chunk key (fresh)                value chunk
    langgraph:m                                name                             saver metadata

A checkpoint entry carries two tags (:class:`~swarmstate.Tags`, kept by the
store on its row): ``order`` = ``O(checkpoint id)`` and, when its metadata
names a run, ``group`` = the run's tag (:mod:`.catalog`).

Written by earlier releases and still read (:mod:`.legacy`)::

    langgraph:t F(thread) F(checkpoint_ns) v   F(channel) V(version)           channel value
    langgraph:t F(thread) F(checkpoint_ns) s   segment key (random)             list segment

and written by the release before tags, deleted when ``setup()`` or a
saver's first put converts the store (:func:`.catalog.convert`)::

    langgraph:t F(thread) F(checkpoint_ns) r   F(run_id)                       runs seen here
    langgraph:t F(thread) ~a                   period                           its activity
    langgraph:r F(run_id)                      F(thread) F(checkpoint_ns)       run index
    langgraph:i                                O(checkpoint id) F(thread) F(ns) checkpoint index
    langgraph:a                                period F(thread)                 thread activity
    langgraph:n                                F(thread)                        thread registry
    langgraph:y                                F(module) F(class name)          types written

A checkpoint entry's value (its layouts: :mod:`.entry`) holds the
checkpoint with its metadata, parent id and run id, and the stored form of
each channel value (:mod:`.values`): small ones inline, others as ranges of
the thread's chunks (:mod:`.sharing`), which every namespace of the thread
shares (a subgraph's checkpoints share its parent's bytes); a pending write's is
``[task id, idx, task path, channel, type, bytes]``, or with the bytes
compressed (:mod:`.pack`) ``[task id, idx, task path, channel, type,
packed, size]``. A checkpoint key ends in
:data:`CHECKPOINT`; a write key ends in its index's last digit, so the last
character tells them apart.
Questions across threads (``list(None)``, threads by activity, idle
threads, a run's checkpoints) are ordered ranges of the tags; see
:mod:`.catalog`.

A checkpoint and its pending writes share one namespace and one key prefix,
``O(checkpoint id)``, which sorts exactly like the checkpoint id (uuid6,
time ordered) and is prefix-free. So in key order each checkpoint is
followed by its own writes, and a reverse scan meets a checkpoint's writes
just before the checkpoint itself:

* latest checkpoint: the last key; if that is a checkpoint, it has no
  writes and one lookup answered everything;
* one checkpoint with its writes: one range ``[O(id), O(id) + "x")``;
* ``list(before=id, limit=k)``: one reverse range with ``stop=O(id)``.

``V(version)`` tags a channel version with its type (``s`` str, ``i`` int,
``f`` float) so that ``"1"`` and ``1`` never share a key.

``O(x)`` escapes the two lowest code points and appends a terminator:
``\\x01`` -> ``\\x01\\x03``, ``\\x00`` -> ``\\x01\\x02``, then ``\\x01\\x01``. This
keeps code-point order (``O(a) < O(b)`` iff ``a < b``, whatever follows) and
writes no NUL, which PostgreSQL text cannot hold.

This module has no LangGraph import: it is plain string work.
"""

from __future__ import annotations

from typing import Final

__all__ = [
    "ACTIVITY",
    "CHECKPOINT",
    "CHECKPOINTS",
    "CHUNKS",
    "ID_END",
    "INDEX",
    "META",
    "PERIODS",
    "REGISTRY",
    "ROOT",
    "RUNS",
    "SEGMENTS",
    "THREADS",
    "TYPES",
    "VALUES",
    "WRITE",
    "Scopes",
    "checkpoint_id_of",
    "checkpoint_key",
    "chunks",
    "field",
    "group_range",
    "is_special_write",
    "ordered",
    "parse_entry_key",
    "parse_runs_seen",
    "parse_scope",
    "read_field",
    "scope",
    "segments",
    "thread_prefix",
    "value_key",
    "values",
    "write_key",
]

ROOT: Final = "langgraph:"
THREADS: Final = ROOT + "t"
RUNS: Final = ROOT + "r"
INDEX: Final = ROOT + "i"
"""The release before tags: every checkpoint by id (deleted by the conversion)."""
ACTIVITY: Final = ROOT + "a"
"""The release before tags: the periods each thread was written in (deleted likewise)."""
REGISTRY: Final = ROOT + "n"
"""The release before tags: every thread once (deleted likewise)."""
TYPES: Final = ROOT + "y"
"""Where earlier releases recorded the classes graphs wrote (``F(module) F(name)``).

Never written now, and never read: what a reader revives is named by code,
not by stored data (:mod:`.allowlist`). The conversion to tags deletes them."""
META: Final = ROOT + "m"
"""What the saver records about the store's data (that its checkpoints carry tags; the
idle sweep's mark)."""
CHECKPOINTS: Final = "c"
"""Kind letter ending a checkpoint namespace."""
RUNS_SEEN: Final = "r"
"""Kind letter ending the namespace of the runs that wrote to a checkpoint namespace
(the release before tags)."""
VALUES: Final = "v"
"""Kind letter ending the namespace of a checkpoint namespace's channel values."""
SEGMENTS: Final = "s"
"""Kind letter ending the namespace of a checkpoint namespace's list segments."""
CHUNKS: Final = "~c"
"""Ending the namespace of a thread's value chunks (never the start of a field)."""
PERIODS: Final = "~a"
"""Ending the namespace of the activity periods a thread was written in (the release
before tags)."""
_END: Final = "\x01\x01"
ID_END: Final = _END
"""The terminator of ``O(id)``: a key's head up to and including it names its checkpoint."""
CHECKPOINT: Final = "c"
"""Suffix of a checkpoint's key after ``O(id)``."""
_END_CHECKPOINT: Final = _END + CHECKPOINT
WRITE: Final = "w"
"""Suffix starting a pending write's key after ``O(id)``; sorts after :data:`CHECKPOINT`."""
_GROUP_END: Final = "x"
_SCOPES_MAX: Final = 4096


def field(text: str) -> str:
    """Encode one id as a self-delimiting field: ``<length>:<text>,``."""
    return f"{len(text)}:{text},"


def read_field(data: str, pos: int) -> tuple[str, int]:
    """Decode the field starting at ``data[pos]``; returns it and the position after it."""
    colon = data.index(":", pos)
    end = colon + 1 + int(data[pos:colon])
    if data[end] != ",":
        raise ValueError(f"malformed field at {pos} in {data!r}")
    return data[colon + 1 : end], end + 1


def ordered(text: str) -> str:
    """``O(text)``: an order-preserving, prefix-free encoding of one id."""
    if "\x01" in text or "\x00" in text:
        text = text.replace("\x01", "\x01\x03").replace("\x00", "\x01\x02")
    return text + _END


def thread_prefix(thread_id: str) -> str:
    """The prefix shared by every namespace of one thread, and only of it."""
    return f"{THREADS}{len(thread_id)}:{thread_id},"


def scope(thread_id: str, checkpoint_ns: str) -> str:
    """The namespace holding one (thread, checkpoint namespace)'s checkpoints and writes."""
    return _thread_namespace(thread_id, checkpoint_ns, CHECKPOINTS)


class Scopes:
    """:func:`scope` of the (thread, checkpoint namespace) pairs in use, kept.

    Building a namespace is a measurable part of a put; it is a pure function
    of the ids, so a kept one is never stale. Emptied when large.
    """

    __slots__ = ("_names",)

    def __init__(self) -> None:
        self._names: dict[tuple[str, str], str] = {}

    def namespace(self, thread_id: str, checkpoint_ns: str) -> str:
        """``scope(thread_id, checkpoint_ns)``."""
        names = self._names
        name = names.get((thread_id, checkpoint_ns))
        if name is None:
            if len(names) > _SCOPES_MAX:
                names.clear()
            name = names[(thread_id, checkpoint_ns)] = scope(thread_id, checkpoint_ns)
        return name


def parse_scope(namespace: str) -> tuple[str, str] | None:
    """``(thread_id, checkpoint_ns)`` of a checkpoint namespace, or None if it is not one."""
    return _parse_thread_namespace(namespace, CHECKPOINTS)


def _parse_thread_namespace(namespace: str, kind: str) -> tuple[str, str] | None:
    """``(thread_id, checkpoint_ns)`` of a thread namespace ending in ``kind``, else None."""
    if not namespace.startswith(THREADS):
        return None
    try:
        thread_id, pos = read_field(namespace, len(THREADS))
        checkpoint_ns, pos = read_field(namespace, pos)
    except (ValueError, IndexError):
        return None
    if namespace[pos:] != kind:
        return None
    return thread_id, checkpoint_ns


def checkpoint_key(checkpoint_id: str) -> str:
    """Key of a checkpoint entry."""
    if "\x01" in checkpoint_id or "\x00" in checkpoint_id:
        return ordered(checkpoint_id) + CHECKPOINT
    return checkpoint_id + _END_CHECKPOINT  # ordered() of an id without escapes, inline


def write_key(checkpoint_id: str, task_id: str, idx: int) -> str:
    """Key of one pending write of a checkpoint."""
    return f"{ordered(checkpoint_id)}{WRITE}{len(task_id)}:{task_id},{idx}"


def is_special_write(key: str) -> bool:
    """Whether a write key's index is negative (an error, interrupt or resume write).

    The index is the key's last field, after the length-prefixed task id.
    """
    return key.rpartition(",")[2].startswith("-")


def group_range(checkpoint_id: str) -> tuple[str, str]:
    """``(start, stop)`` selecting a checkpoint's entry and its writes."""
    head = ordered(checkpoint_id)
    return head, head + _GROUP_END


def parse_entry_key(key: str) -> tuple[str, bool]:
    """``(checkpoint_id, is_checkpoint)`` of a key in a checkpoint namespace."""
    end = key.index(_END)
    text = key[:end]
    if "\x01" in text:
        text = text.replace("\x01\x02", "\x00").replace("\x01\x03", "\x01")
    return text, key[end + 2 :] == CHECKPOINT


def checkpoint_id_of(key: str) -> str:
    """The checkpoint id of a checkpoint key, without a full parse for the common ids."""
    text = key[:-3]  # drop the terminator and CHECKPOINT
    if "\x01" in text:
        return parse_entry_key(key)[0]
    return text


def _thread_namespace(thread_id: str, checkpoint_ns: str, kind: str) -> str:
    return f"{THREADS}{field(thread_id)}{field(checkpoint_ns)}{kind}"


def values(thread_id: str, checkpoint_ns: str) -> str:
    """Namespace of the channel values of one (thread, checkpoint namespace)."""
    return _thread_namespace(thread_id, checkpoint_ns, VALUES)


def chunks(thread_id: str) -> str:
    """Namespace of the value chunks of one thread, shared by its checkpoint namespaces."""
    return f"{THREADS}{len(thread_id)}:{thread_id},{CHUNKS}"


def segments(thread_id: str, checkpoint_ns: str) -> str:
    """Namespace of the list segments of one (thread, checkpoint namespace)."""
    return _thread_namespace(thread_id, checkpoint_ns, SEGMENTS)


def value_key(channel: str, version: object) -> str | None:
    """Key of one channel's value at one version, or None for a version of another type."""
    kind = type(version)
    if kind is str:
        return f"{len(channel)}:{channel},s{version}"
    if kind is int:
        return f"{len(channel)}:{channel},i{version}"
    if kind is float:
        return f"{len(channel)}:{channel},f{version!r}"
    return None


def parse_runs_seen(namespace: str) -> tuple[str, str] | None:
    """``(thread_id, checkpoint_ns)`` of a :func:`runs_seen` namespace, else None."""
    return _parse_thread_namespace(namespace, RUNS_SEEN)
