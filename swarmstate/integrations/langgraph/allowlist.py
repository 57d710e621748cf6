"""The graph's own types: learned from what it writes, so that they revive when read back.

The saver's default serializer is strict (LangGraph's ``JsonPlusSerializer``
with its allowlist: no pickle, only listed types revived). LangGraph hands a
checkpointer the types of a graph's state (``with_allowlist``) only when its
own strict mode is on, so with LangGraph's defaults a strict saver would read
the graph's own dataclasses, enums and models back as dicts.

So the saver allows what the graph itself writes through it: every type the
serializer stored as one of LangGraph's object extensions in a value or a
pending write (module and class name, read from the bytes it just wrote; for
lists of models the memo already knows their classes). Those are types of
live objects of this process, never names read from stored data. They are
also recorded in the store, in the put's own batch, so that a restarted
process reads them back: a recorded type is allowed there only once its
module is imported (the graph's code imports it; a module is never imported
because the store names it).

A stored object of any other type is still read as its fields, as in
LangGraph's strict mode, and the saver says so in the log once per type,
naming the type and the line that allows it.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import sys
import threading
from collections.abc import Iterable, Iterator
from typing import Any, Final

import ormsgpack
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener

from swarmstate._base import BaseStore
from swarmstate._codec import dumps
from swarmstate.integrations.langgraph import keys as K

__all__ = ["Allowlist", "ext_types", "reading"]

logger = logging.getLogger("swarmstate")

Type = tuple[str, str]
"""``(module, class name)``, as LangGraph's allowlists name a type."""

_NIL: Final = dumps(None)
_CLASS_EXTS: Final = frozenset(range(6))
"""LangGraph's extensions that name a class first: constructors, methods, pydantic models."""
_SNAPSHOT_EXT: Final = 7
"""LangGraph's DeltaChannel snapshot extension: a value around a value."""
_EXT_HEADS: Final = (b"\xc7", b"\xc8", b"\xc9")
"""msgpack ext 8/16/32 headers: a class extension is longer than a fixext holds."""


def ext_types(data: bytes) -> set[Type]:
    """The classes LangGraph's serializer stored as extensions in ``data`` (its msgpack bytes).

    Cheap when there are none: a few ``in`` scans of the bytes for an
    extension header; only bytes that hold one are decoded (with every
    extension left as it is).
    """
    if not any(head in data for head in _EXT_HEADS):
        return set()
    found: set[Type] = set()

    def hook(code: int, payload: bytes) -> None:
        if code in _CLASS_EXTS or code == _SNAPSHOT_EXT:
            # Nested objects (an enum inside a dataclass) are met by the same hook.
            value = ormsgpack.unpackb(payload, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
            if (
                code != _SNAPSHOT_EXT
                and type(value) is list
                and len(value) >= 2
                and type(value[0]) is str
                and type(value[1]) is str
            ):
                found.add((value[0], value[1]))

    with contextlib.suppress(ormsgpack.MsgpackDecodeError, TypeError, ValueError):
        ormsgpack.unpackb(data, ext_hook=hook, option=ormsgpack.OPT_NON_STR_KEYS)
    return found


_reading: contextvars.ContextVar[Allowlist | None] = contextvars.ContextVar(
    "swarmstate_reading", default=None
)


@contextlib.contextmanager
def reading(allowlist: Allowlist) -> Iterator[None]:
    """Mark a saver's read, so that a type the serializer blocks in it is reported."""
    token = _reading.set(allowlist)
    try:
        yield
    finally:
        _reading.reset(token)


def _report(event: SerdeEvent) -> None:
    allowlist = _reading.get()
    if event.get("kind") != "msgpack_blocked" or allowlist is None:
        return
    named = (event["module"], event["name"])
    with allowlist.lock:
        if named in allowlist.reported or len(allowlist.reported) > 1024:
            return  # once per type and saver
        allowlist.reported.add(named)
    logger.warning(
        "SwarmStateSaver read a stored %s.%s as its fields: its serializer does not allow "
        "that type, which this process has not written through the saver. Allow it with "
        "SwarmStateSaver(store, serde=strict_serializer(allow=[%s])), or set "
        "LANGGRAPH_STRICT_MSGPACK=true (LangGraph then allows the types of your graph's state)",
        named[0],
        named[1],
        named[1],
    )


register_serde_event_listener(_report)


class Allowlist:
    """The types one saver (and its ``with_allowlist`` clones) has seen written, and their reads."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store
        self.known: set[Type] = set()
        self.reported: set[Type] = set()  # blocked types already logged
        self.lock = threading.Lock()
        self._version = 0
        self._readers: dict[int, tuple[Any, Any, int]] = {}
        self._recorded: set[Type] | None = None  # read from the store once
        self._waiting: set[Type] = set()  # recorded, module not imported yet

    def new(self, found: Iterable[Type]) -> list[Type]:
        """The types of ``found`` not yet known (to record with the put that wrote them)."""
        known = self.known
        return [named for named in found if named not in known]

    def rows(self, types: Iterable[Type]) -> list[tuple[str, str, bytes]]:
        """The entries that record ``types`` in the store (ensured in a put's batch)."""
        return [(K.TYPES, K.field(module) + K.field(name), _NIL) for module, name in types]

    def add(self, types: Iterable[Type]) -> None:
        """Allow ``types`` from now on (they were written)."""
        with self.lock:
            before = len(self.known)
            self.known.update(types)
            if len(self.known) != before:
                self._version += 1

    def reader(self, serde: Any) -> Any:
        """``serde`` allowing the known types too (a clone made once per change)."""
        self._load_recorded()
        if not self.known:
            return serde
        found = self._readers.get(id(serde))
        if found is not None and found[0] is serde and found[2] == self._version:
            return found[1]
        widen = getattr(serde, "with_msgpack_allowlist", None)
        clone = widen(sorted(self.known)) if widen is not None else serde
        if len(self._readers) > 64:
            self._readers.clear()
        self._readers[id(serde)] = (serde, clone, self._version)
        return clone

    def _load_recorded(self) -> None:
        """The types the store records, each allowed once its module is imported."""
        if self._recorded is None:
            recorded = set()
            for key in self.store.keys(K.TYPES):
                module, at = K.read_field(key, 0)
                recorded.add((module, K.read_field(key, at)[0]))
            self._recorded = recorded
            self._waiting = recorded - self.known
        if self._waiting:
            ready = {named for named in self._waiting if _imported(named)}
            if ready:
                self._waiting -= ready
                self.add(ready)


def _imported(named: Type) -> bool:
    """Whether ``module.name`` is a class of a module this process has already imported."""
    module = sys.modules.get(named[0])
    return module is not None and isinstance(getattr(module, named[1], None), type)
