"""The classes a saver's reads revive: named by this process's code, never by stored data.

The saver's default serializer is strict (LangGraph's ``JsonPlusSerializer``
with its allowlist: no pickle, only listed classes revived). Besides
LangGraph's safe set, which that serializer allows by itself, a read revives:

* the classes the application declares: ``allow=`` of the saver or of
  ``strict_serializer``, each with the classes its fields declare (so a
  graph's state schema names them all), and what LangGraph's runtime passes
  to ``with_allowlist`` in its strict mode;
* every class this process has written through any saver, found at any
  depth of what it wrote (containers, dataclass, pydantic and NamedTuple
  field values, a ``Send``'s argument, an ``Interrupt``'s value), with the
  classes their fields declare. A write learns them before it is stored, so
  a write the store refuses still teaches them. The set is one per process:
  every saver gives the same answer for the same bytes.

Invariant: nothing read from a store adds to these sets. (Releases before
this one recorded the written classes in the store, under ``keys.TYPES``;
such rows are never read.) A stored object of any other class comes back as
LangGraph's strict mode returns it, its fields, and the log says so once per
class, naming the parameter that allows it.

What a write costs: the serializer's msgpack bytes without an extension
type byte hold only plain data, and nothing is walked; a class's declared
fields are walked once per process.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import enum
import logging
import operator
import threading
import typing
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, TypeVar

import ormsgpack
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from pydantic import BaseModel

from swarmstate._errors import InvalidArgumentError
from swarmstate.integrations.langgraph.memo import STRICT

__all__ = ["Allowlist", "classes_in", "declared", "learn", "objects_in"]

logger = logging.getLogger("swarmstate")

T = TypeVar("T")
Type = tuple[str, str]
"""``(module, class name)``, as LangGraph's allowlists name a class."""

_ATOMS: Final = frozenset({str, int, float, bool, bytes, type(None)})
_SEQUENCES: Final = frozenset({list, tuple, set, frozenset, deque})
_PLAIN: Final = frozenset(_ATOMS | _SEQUENCES | {dict})
"""Classes that are data, not classes to allow (msgpack's own, and the containers)."""
_NOTHING: Final[frozenset[type]] = frozenset()
_REPORTED_MAX: Final = 1024
_MANY: Final = 8
"""Items from which a list of models is checked in one packing rather than walked."""

# -- what this process wrote ----------------------------------------------------------

_lock = threading.Lock()
_walked: set[Any] = set(_PLAIN)
"""Classes (and annotations) whose names are in :data:`_allowed` already, fields included."""
_allowed: tuple[int, frozenset[Type]] = (0, frozenset())
"""``(version, names)``: every class this process wrote, replaced whole on a change."""
_reported: set[Type] = set()


def learn(classes: Iterable[type]) -> None:
    """Allow ``classes`` (written by this process) and those their fields declare, everywhere."""
    global _allowed
    fresh = [cls for cls in classes if cls not in _walked]
    if not fresh:
        return
    named: set[Type] = set()
    with _lock:
        for cls in fresh:
            _walk(cls, _walked, named)
        version, known = _allowed
        if not named <= known:
            _allowed = (version + 1, known | named)


def classes_in(value: Any, kind: str, data: Any) -> frozenset[type] | set[type]:
    """The classes of the objects ``value`` holds, given what the serializer made of it.

    Empty at once for a str, int, float or bool (not a subclass), or when its
    msgpack bytes hold nothing shaped like an object
    (:func:`_object_shaped`), or, when too many bytes look like the start of
    one to check each, when the value packs as plain data with no hook; a
    value that may hold objects is walked (:func:`objects_in`).
    """
    if type(value) in _SCALARS:
        return _NOTHING  # a str, int, float or bool holds no object (a subclass is walked)
    if kind == "msgpack" and type(data) is bytes:
        shaped = _object_shaped(data)
        if shaped is False or (shaped is None and _plain(value)):
            return _NOTHING
    elif kind in ("null", "bytes", "bytearray"):
        return _NOTHING
    return objects_in(value)


_SCALARS: Final = frozenset((str, int, float, bool))
"""Builtin types whose values hold no object; their subclasses (an enum of str) may."""
_EXT_HEADS: Final = ((0xC7, 2), (0xC8, 3), (0xC9, 5), (0xD7, 1), (0xD8, 1))
"""Each msgpack extension marker an object can take, and the bytes to its type code.

ext 8/16/32, and fixext 8 and 16: an object's data (an array, the module's
name, the class name, the arguments) takes at least six bytes, so never
fixext 1, 2 or 4.
"""
_OBJECT_CODES: Final = 5
"""The serializer writes an object as extension 0-5, its data ``(module, class name, ...)``."""
_LOOKS_PER_KIB: Final = 1
"""Marker bytes checked one by one per KiB of data; past that, packing the value is cheaper."""


def _object_shaped(data: bytes) -> bool | None:
    """Whether ``data`` holds bytes shaped like an object the serializer wrote (None: too many).

    Never False when it holds one: an object is an extension of type 0-5
    whose data is an array opening with its module's name, a str. Marker
    bytes are found with ``memchr`` and each is checked for that
    shape, so a string's length byte that happens to be a marker (a 200-byte
    text's is ``0xc8``) costs a few comparisons, not a walk of the value.
    More than one a KiB (text whose UTF-8 uses those bytes, many strings of
    those lengths) is left to :func:`_plain`, whose cost is the size.
    """
    find = data.find
    end = len(data) - 2
    looks = max(8, _LOOKS_PER_KIB * (len(data) >> 10))
    for marker, head in _EXT_HEADS:
        at = find(marker)
        while at >= 0:
            looks -= 1
            if looks < 0:
                return None
            code = at + head
            if (
                code < end
                and data[code] <= _OBJECT_CODES
                and 0x90 <= data[code + 1] <= 0x9F
                and (0xA0 <= data[code + 2] <= 0xBF or 0xD9 <= data[code + 2] <= 0xDB)
            ):
                return True
            at = find(marker, at + 1)
    return False


def _plain(value: Any) -> bool:
    """Whether ``value`` is builtin data only: it packs with no hook and no passthrough type."""
    try:
        ormsgpack.packb(value, option=STRICT)
    except (TypeError, ValueError):  # an object (or a key or number msgpack has no form for)
        return False
    return True


def objects_in(value: Any) -> set[type]:
    """The classes of the objects in ``value`` at any depth, as the serializer traverses it."""
    found: set[type] = set()
    stack = [value]
    pop = stack.pop
    extend = stack.extend
    atoms = _ATOMS
    fields = _fields
    seen: set[int] = set()  # what is met twice (shared, or a cycle) is walked once
    add = seen.add
    while stack:
        item = pop()
        kind = type(item)
        if kind in atoms or id(item) in seen:
            continue
        add(id(item))
        if kind is list or kind is tuple:
            if len(item) >= _MANY:
                models = _plain_models(item)
                if models is not None:  # a conversation's messages: one packing, no walk
                    found |= models
                    continue
            extend(item)
            continue
        if kind is dict:
            extend(item.values())
            extend(item)
            continue
        found.add(kind)
        getter = fields.get(kind)
        if getter is None:
            getter = fields[kind] = _fields_of(kind)
        extend(getter(item))
    return found


def _plain_models(items: Sequence[Any]) -> set[type] | None:
    """The classes of ``items`` if each is a pydantic model whose fields are plain data, else None.

    Checked by packing every item's fields in one call under exact builtin
    types, much cheaper than walking them one by one.
    """
    kinds = set(map(type, items))
    dumps = _dumps
    for cls in kinds:
        fields = dumps.get(cls)
        if fields is None:
            fields = dumps[cls] = _fields_are_dumped(cls)
        if not fields:
            return None
    try:
        ormsgpack.packb([item.__dict__ for item in items], option=STRICT)
        ormsgpack.packb([item.__pydantic_extra__ for item in items], option=STRICT)
    except TypeError:  # a field holds an object
        return None
    return kinds


def declared(allow: Sequence[Any], what: str) -> frozenset[Type]:
    """The names ``allow`` declares: each class with the classes its fields declare.

    ``allow`` holds classes (a state schema, a dataclass, a model, an Enum)
    or ``(module, class name)`` pairs; ``what`` names the parameter in errors.
    """
    if isinstance(allow, (str, bytes)) or not isinstance(allow, Sequence):
        raise InvalidArgumentError(
            f"{what} must be a list of classes or (module, class name) pairs, got {allow!r}"
        )
    named: set[Type] = set()
    for item in allow:
        if type(item) is tuple and len(item) == 2 and all(type(n) is str and n for n in item):
            named.add(item)
        elif isinstance(item, type) or typing.get_origin(item) is not None:
            _walk(item, set(_PLAIN), named)
        else:
            raise InvalidArgumentError(
                f"{what} must hold classes or (module, class name) pairs of str, got {item!r}"
            )
    return frozenset(named)


# -- reads ----------------------------------------------------------------------------

_reading: contextvars.ContextVar[set[Type] | None] = contextvars.ContextVar(
    "swarmstate_reading", default=None
)
"""The classes the serializer blocked in the saver's read under way (None outside one)."""


def _blocked(event: SerdeEvent) -> None:
    blocked = _reading.get()
    if blocked is not None and event.get("kind") == "msgpack_blocked":
        blocked.add((event["module"], event["name"]))


register_serde_event_listener(_blocked)


class Allowlist:
    """One saver's reads: its serializer allowing what it declares and what the process wrote."""

    def __init__(self, extra: frozenset[Type] = frozenset()) -> None:
        self.extra = extra
        self._readers: dict[int, tuple[Any, Any, int]] = {}

    def read(self, serde: Any, read: Callable[[Any], T]) -> T:
        """``read(reader)``, with the reader from :meth:`reader`; blocked classes are logged."""
        blocked: set[Type] = set()
        token = _reading.set(blocked)
        try:
            result = read(self.reader(serde))
        finally:
            _reading.reset(token)
        if blocked:
            _report(blocked)
        return result

    def reader(self, serde: Any) -> Any:
        """``serde`` allowing the declared and written classes too (cloned once per change)."""
        version, written = _allowed
        if not written and not self.extra:
            return serde
        found = self._readers.get(id(serde))
        if found is not None and found[0] is serde and found[2] == version:
            return found[1]
        widen = getattr(serde, "with_msgpack_allowlist", None)
        clone = widen(sorted(written | self.extra)) if widen is not None else serde
        if len(self._readers) > 64:
            self._readers.clear()
        self._readers[id(serde)] = (serde, clone, version)
        return clone


def _report(blocked: set[Type]) -> None:
    with _lock:
        fresh = sorted(blocked - _reported)[: max(0, _REPORTED_MAX - len(_reported))]
        _reported.update(fresh)
    for module, name in fresh:
        logger.warning(
            "SwarmStateSaver read a stored %s as its fields: nothing allows that class "
            "(this process has not written it through a saver, and the application does not "
            "declare it). If it is one of your graph's classes, allow it with "
            "SwarmStateSaver(store, allow=[%s]), or allow=[YourState] to allow every class "
            "your graph's state schema declares",
            _shown(f"{module}.{name}"),
            _shown(name),
        )


def _shown(name: str) -> str:
    """A class name read from the store, as a log line may show it (escaped unless plain)."""
    if all(part.isidentifier() for part in name.split(".")) and len(name) <= 200:
        return name
    return repr(name[:200])


# -- walking classes and values -------------------------------------------------------

_fields: dict[type, Callable[[Any], Iterable[Any]]] = {}
"""Per class: what the serializer writes of an instance (the values to walk next)."""


def _fields_of(cls: type) -> Callable[[Any], Iterable[Any]]:
    """How to get the values the serializer writes of a ``cls`` instance."""
    if issubclass(cls, enum.Enum):
        return lambda member: (member.value,)
    if issubclass(cls, BaseModel):
        if _fields_are_dumped(cls):
            return lambda model: (
                *model.__dict__.values(),
                *(model.__pydantic_extra__ or {}).values(),
            )
        return lambda model: (model.model_dump(),)  # computed or serialized: what is written
    if issubclass(cls, dict):
        return lambda mapping: (*mapping, *mapping.values())
    if issubclass(cls, (tuple, list, set, frozenset, deque)):  # NamedTuple and the like
        return _same
    if issubclass(cls, BaseException):  # written as its repr
        return _none
    names: list[str] = []
    if dataclasses.is_dataclass(cls):
        names = [field.name for field in dataclasses.fields(cls)]
    else:
        for klass in cls.__mro__:
            slots = vars(klass).get("__slots__", ())
            names += [slots] if isinstance(slots, str) else list(slots)
        names = [name for name in names if name not in ("__dict__", "__weakref__")]
    plain = "__dict__" in dir(cls) and not dataclasses.is_dataclass(cls)
    if not names and not plain:
        return _none  # datetime, UUID, Decimal, ...: written from plain data
    getters = [operator.attrgetter(name) for name in names]

    def values(obj: Any) -> list[Any]:
        found = []
        for get in getters:
            with contextlib.suppress(AttributeError):  # an unset slot
                found.append(get(obj))
        if plain:
            found.extend(getattr(obj, "__dict__", {}).values())
        return found

    return values


_dumps: dict[type, bool] = {}
"""Per class: whether :func:`_fields_are_dumped` holds."""


def _fields_are_dumped(cls: type) -> bool:
    """Whether the serializer writes a ``cls`` instance's fields as they are (a plain model)."""
    if not issubclass(cls, BaseModel):
        return False
    decorators = cls.__pydantic_decorators__
    return (
        cls.model_dump is BaseModel.model_dump
        and not cls.__pydantic_computed_fields__
        and not decorators.field_serializers
        and not decorators.model_serializers
    )


def _same(obj: Any) -> Any:
    return obj


def _none(obj: Any) -> tuple[()]:
    return ()


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
    schema = issubclass(cls, dict) and hasattr(cls, "__total__")  # a TypedDict: a dict when stored
    if not schema:
        named.add((cls.__module__, cls.__name__))
    hints: dict[str, Any] = {}
    if (
        schema
        or dataclasses.is_dataclass(cls)
        or hasattr(cls, "model_fields")
        or hasattr(cls, "_fields")
    ):
        with contextlib.suppress(Exception):  # annotations that do not resolve: none
            hints = typing.get_type_hints(cls)
    for hint in hints.values():
        _walk(hint, seen, named)
