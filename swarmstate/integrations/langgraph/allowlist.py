"""The graph's own types: learned from what it writes, so that they revive when read back.

The saver's default serializer is strict (LangGraph's ``JsonPlusSerializer``
with its allowlist: no pickle, only listed types revived). LangGraph hands a
checkpointer the types of a graph's state (``with_allowlist``) only when its
own strict mode is on, so with LangGraph's defaults a strict saver would read
the graph's own dataclasses, enums and models back as dicts.

So the saver allows what the graph itself writes through it: the classes of
the values and pending writes it stores (a value's own class, or its items'
and its dict values' classes), each with the classes its fields are declared
with (dataclass fields, pydantic fields, NamedTuple fields, and what their
annotations name: ``list[Ticket]``, ``Priority | None``), the way LangGraph's
strict mode walks a state schema. Those are classes of live objects of this
process and their annotations, never names read from stored data, and each
class is walked once. They are also recorded in the store, in the put's own
batch, so that a restarted process reads them back: a recorded type is
allowed there only once its module is imported (the graph's code imports
it; a module is never imported because the store names it).

A stored object of any other type is still read as its fields, as in
LangGraph's strict mode, and the saver says so in the log once per type,
naming the type and the line that allows it.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import logging
import sys
import threading
import typing
from collections.abc import Callable, Iterable
from typing import Any, Final, TypeVar

from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener

from swarmstate._base import BaseStore
from swarmstate._codec import dumps
from swarmstate.integrations.langgraph import keys

__all__ = ["Allowlist", "classes_of"]

logger = logging.getLogger("swarmstate")

T = TypeVar("T")
Type = tuple[str, str]
"""``(module, class name)``, as LangGraph's allowlists name a type."""

_NIL: Final = dumps(None)
_PLAIN: Final = frozenset(
    {str, int, float, bool, bytes, type(None), list, dict, tuple, set, frozenset}
)
"""Classes that are data, not types to allow (msgpack's own, and the containers)."""


def classes_of(value: Any) -> set[type]:
    """The classes a value brings to the state: its own, or its items' and its dict values'."""
    kind = type(value)
    if kind is list or kind is tuple:
        found = set(map(type, value))
    elif kind is dict:
        found = set(map(type, value.values()))
    else:
        return {kind}
    found.add(kind)
    return found


_reading: contextvars.ContextVar[set[Type] | None] = contextvars.ContextVar(
    "swarmstate_reading", default=None
)
"""The types the serializer blocked in the saver's read under way (None outside one)."""


def _blocked(event: SerdeEvent) -> None:
    blocked = _reading.get()
    if blocked is not None and event.get("kind") == "msgpack_blocked":
        blocked.add((event["module"], event["name"]))


register_serde_event_listener(_blocked)


class Allowlist:
    """The types one saver (and its ``with_allowlist`` clones) has seen written, and their reads."""

    def __init__(self, store: BaseStore) -> None:
        self.store = store
        self.known: set[Type] = set()
        self.reported: set[Type] = set()  # blocked types already logged
        self._walked: set[Any] = set(_PLAIN)  # classes whose types are known
        self.lock = threading.Lock()
        self._version = 0
        self._readers: dict[int, tuple[Any, Any, int]] = {}
        self._recorded: set[Type] | None = None  # read from the store once
        self._waiting: set[Type] = set()  # recorded, module not imported yet

    def new(self, classes: Iterable[type]) -> list[Type]:
        """The types ``classes`` bring that are not yet known (to record with their put).

        Each class is walked once: itself and the classes its fields are
        declared with, recursively.
        """
        seen = self._walked
        fresh = [cls for cls in classes if cls not in seen]
        if not fresh:
            return []
        named: set[Type] = set()
        for cls in fresh:
            _walk(cls, seen, named)
        known = self.known
        return [item for item in named if item not in known]

    def rows(self, types: Iterable[Type]) -> list[tuple[str, str, bytes]]:
        """The entries that record ``types`` in the store (ensured in a put's batch)."""
        return [(keys.TYPES, keys.field(module) + keys.field(name), _NIL) for module, name in types]

    def add(self, types: Iterable[Type]) -> None:
        """Allow ``types`` from now on (they were written)."""
        with self.lock:
            before = len(self.known)
            self.known.update(types)
            if len(self.known) != before:
                self._version += 1

    def read(self, serde: Any, read: Callable[[Any], T]) -> T:
        """``read(reader)``, with ``serde`` allowing the known types, as one read of the saver.

        The types the store records are loaded only when the serializer
        blocks a type in a read (a process reading what an earlier one
        wrote): then, if that allows anything new, the read is done again.
        A type still blocked is logged, once per type and saver.
        """
        blocked: set[Type] = set()
        token = _reading.set(blocked)
        try:
            result = read(self.reader(serde))
            if blocked and self._load_recorded():
                blocked.clear()
                result = read(self.reader(serde))
        finally:
            _reading.reset(token)
        if blocked:
            self._report(blocked)
        return result

    def reader(self, serde: Any) -> Any:
        """``serde`` allowing the known types too (a clone made once per change)."""
        if self._waiting:
            self._allow_imported()
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

    def load(self) -> None:
        """Read the types the store records (each allowed once its module is imported)."""
        self._load_recorded()

    def _load_recorded(self) -> bool:
        """Load the recorded types once; whether that allowed any type not known before."""
        if self._recorded is not None:
            return False
        recorded = set()
        for key in self.store.keys(keys.TYPES):
            module, at = keys.read_field(key, 0)
            recorded.add((module, keys.read_field(key, at)[0]))
        self._recorded = recorded
        self._waiting = recorded - self.known
        before = self._version
        self._allow_imported()
        return self._version != before

    def _allow_imported(self) -> None:
        ready = {named for named in self._waiting if _imported(named)}
        if ready:
            self._waiting -= ready
            self.add(ready)

    def _report(self, blocked: set[Type]) -> None:
        with self.lock:
            fresh = sorted(blocked - self.reported)[: max(0, 1024 - len(self.reported))]
            self.reported.update(fresh)
        for module, name in fresh:
            logger.warning(
                "SwarmStateSaver read a stored %s.%s as its fields: its serializer does not "
                "allow that type, which this process has not written through the saver. Allow "
                "it with SwarmStateSaver(store, serde=strict_serializer(allow=[%s])), or set "
                "LANGGRAPH_STRICT_MSGPACK=true (LangGraph then allows the types of your "
                "graph's state)",
                module,
                name,
                name,
            )


def _imported(named: Type) -> bool:
    """Whether ``module.name`` is a class of a module this process has already imported."""
    module = sys.modules.get(named[0])
    return module is not None and isinstance(getattr(module, named[1], None), type)


def _walk(cls: Any, seen: set[Any], named: set[Type]) -> None:
    """Add ``cls`` (a class or an annotation) and the classes its fields name to ``named``."""
    try:
        if cls in seen:
            return
        seen.add(cls)
    except TypeError:  # an unhashable annotation: look inside it only
        pass
    for arg in typing.get_args(cls):
        _walk(arg, seen, named)
    origin = typing.get_origin(cls)
    if origin is not None:
        _walk(origin, seen, named)
        return
    if not isinstance(cls, type) or cls.__module__ == "builtins":
        return
    named.add((cls.__module__, cls.__name__))
    hints: dict[str, Any] = {}
    if dataclasses.is_dataclass(cls) or hasattr(cls, "model_fields") or hasattr(cls, "_fields"):
        with contextlib.suppress(Exception):  # annotations that do not resolve: none
            hints = typing.get_type_hints(cls)
    for hint in hints.values():
        _walk(hint, seen, named)
