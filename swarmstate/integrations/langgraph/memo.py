"""Serialized list items remembered by their content, so a put serializes what changed.

A ``put`` of a growing conversation would serialize every message of the
list again although only the newest are new: that is most of what a put
costs. This memo maps an item's *content* to the bytes LangGraph's
serializer made of it, and reuses them for any item with the same content.

It is exact, not a guess from object identity (an old message edited in
place has other content, so it misses and is serialized anew). It applies
only where the serializer's bytes are a function of the content it reads:

* the serializer writes with LangGraph's ``JsonPlusSerializer.dumps_typed``
  (its encoding does not depend on the instance: allowlists and strictness
  only affect reads);
* the item is a pydantic v2 model whose class keeps ``BaseModel.model_dump``
  and has no field or model serializers and no computed fields, so that
  ``model_dump()`` is a function of the class and of the fields'
  values (``__dict__`` and ``__pydantic_extra__``); the serializer writes
  ``(module, class name, model_dump())``;
* those values are plain data of exact builtin types (``str``, ``int``,
  ``float``, ``bool``, ``None``, ``bytes``, ``list``, ``dict`` with ``str``
  keys): packed with every passthrough option of ormsgpack, anything else
  (a tuple, a subclass, an enum, a datetime, a nested model) refuses to
  pack, and the list is serialized whole.

The key is the class and those values packed to msgpack bytes: equal keys
mean equal types, equal values and equal key order, so equal serializer
bytes. Anything else is serialized, in one serializer call for all the
items that missed.

Every item's ``__dict__`` is also packed in one call, as one array, and
every ``__pydantic_extra__`` in another (:class:`Contents`), kept with the
version's listing. The next version is then told from it without a lookup
per item when it starts with the previous version's items from some ``r``
on, all of them (``r`` is 0 for a list that grew by appending, up to
:data:`_DROPS` for a window trimmed at the front): the classes match and the
packed items from ``r`` on begin the new packed bytes (a ``memcmp``). Those
items have the keys they had when the previous version was serialized, so
its bytes of them stand; only the items after them are looked up. Any other
change (an item edited, removed in the middle or replaced) breaks the run,
and every item is looked up as above.

Bounded by bytes, as two generations: hits move an entry to the young one,
and when it is full the old one is dropped. Lookups take no lock (a race
costs at most a miss).
"""

from __future__ import annotations

import operator
from array import array
from collections.abc import Callable
from itertools import accumulate
from typing import Any, Final, Generic, NamedTuple, TypeVar

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from swarmstate.integrations.langgraph.format.items import array_header, header, item_ends, split

__all__ = ["STRICT", "Contents", "Generations", "Memo"]

_K = TypeVar("_K")
_V = TypeVar("_V")
_MISSING: Final = object()

# Packing options under which only plain data of exact builtin types packs.
STRICT: Final = (
    ormsgpack.OPT_PASSTHROUGH_DATACLASS
    | ormsgpack.OPT_PASSTHROUGH_DATETIME
    | ormsgpack.OPT_PASSTHROUGH_ENUM
    | ormsgpack.OPT_PASSTHROUGH_SUBCLASS
    | ormsgpack.OPT_PASSTHROUGH_TUPLE
    | ormsgpack.OPT_PASSTHROUGH_UUID
)
_MIN_ITEMS: Final = 8


def _eligible(cls: type) -> bool:
    """Whether the serializer's bytes of a ``cls`` instance follow from its field values."""
    if not (isinstance(cls, type) and issubclass(cls, BaseModel)):
        return False
    decorators = cls.__pydantic_decorators__
    return (
        cls.model_dump is BaseModel.model_dump
        and not cls.__pydantic_computed_fields__
        and not decorators.field_serializers
        and not decorators.model_serializers
    )


class Generations(Generic[_K, _V]):
    """A map bounded by bytes, as two generations.

    A hit in the old generation moves the entry to the young one; when the
    young one holds half the budget it becomes the old one, and the old one
    is dropped. ``cost`` says what an entry costs. No lock: dict operations
    are atomic, and a race costs at most a miss.
    """

    def __init__(self, budget: int, cost: Callable[[_K, _V], int]) -> None:
        self.budget = budget
        self._half = budget // 2
        self._cost = cost
        self._young: dict[_K, _V] = {}
        self._old: dict[_K, _V] = {}
        self._young_size = 0

    def __contains__(self, key: _K) -> bool:
        return key in self._young or key in self._old

    def get(self, key: _K, default: Any = None) -> Any:
        found = self._young.get(key, _MISSING)
        if found is _MISSING:
            found = self._old.get(key, _MISSING)
            if found is _MISSING:
                return default
            self.put(key, found)  # type: ignore[arg-type]
        return found

    def get_many(self, keys: list[_K]) -> list[Any]:
        """``[self.get(key) for key in keys]``, the young generation's hits found in C.

        For values that are never None (a None in the result is a miss).
        """
        found = list(map(self._young.get, keys))
        if None in found:
            for index, value in enumerate(found):
                if value is None:
                    found[index] = self.get(keys[index])
        return found

    def put(self, key: _K, value: _V) -> None:
        if self._young_size > self._half:
            self._old, self._young, self._young_size = self._young, {}, 0
        self._young[key] = value
        self._young_size += self._cost(key, value)

    def put_many(self, entries: dict[_K, _V], cost: int) -> None:
        """Put every entry of ``entries`` at once; ``cost`` is what they cost together.

        Within the budget as :meth:`put` is: a batch that costs more than a
        generation holds is put entry by entry, kept as far as the budget goes.
        """
        if cost > self._half:
            for key, value in entries.items():
                self.put(key, value)
            return
        if self._young_size + cost > self._half:
            self._old, self._young, self._young_size = self._young, {}, 0
        self._young.update(entries)
        self._young_size += cost

    def discard(self, key: _K) -> None:
        """Forget ``key`` if it is held."""
        self._young.pop(key, None)
        self._old.pop(key, None)

    def drop(self, which: Callable[[_K], bool]) -> None:
        """Forget every entry whose key ``which`` selects."""
        for generation in (self._young, self._old):
            # list() copies the keys in one step (no Python code runs inside
            # it), so another thread's put cannot change the dict under it.
            for key in [k for k in list(generation) if which(k)]:
                generation.pop(key, None)


class Contents(NamedTuple):
    """What the items of one list version held when it was serialized.

    ``fields`` is the array of every item's ``__dict__`` and ``extras`` of
    its ``__pydantic_extra__``, each packed under :data:`STRICT` in one
    call; ``classes`` the items' classes. Equal items of these mean equal keys.
    ``starts`` says where each item starts in the version's bytes, and where
    the last one ends.
    """

    classes: tuple[type, ...]
    fields: bytes
    extras: bytes
    starts: array[int]
    kinds: frozenset[type]
    """The classes, each once."""

    def cost(self) -> int:
        """Bytes it holds, roughly: what a cache of them counts."""
        return len(self.fields) + len(self.extras) + 16 * len(self.classes) + 128


_FIELDS: Final = operator.attrgetter("__dict__")
_EXTRAS: Final = operator.attrgetter("__pydantic_extra__")
_DROPS: Final = 4
"""Leading items a version may drop (a window trimmed as replies come) and still share."""


def _header(data: bytes) -> tuple[int, int]:
    """``(item count, header length)`` of an array ``packb`` wrote."""
    head = array_header(data)
    assert head is not None  # packb was given a list
    return head


def _item_starts(data: bytes, count: int) -> list[int]:
    """Where the first ``count + 1`` items of the msgpack array ``data`` start (fewer if short)."""
    length, skip = _header(data)
    ends = item_ends(data, skip, min(count, length), fill=False)
    return [skip, *(skip + end for end in ends)]


def _kept(
    classes: tuple[type, ...], fields: bytes, extras: bytes, before: Contents
) -> tuple[int, int]:
    """``(r, k)``: the new items ``[0, k)`` are the previous version's ``[r, r + k)``, its last.

    ``(0, 0)`` when no such run exists with ``r <= _DROPS``: the items begin
    anew. ``r`` is 0 for a list that grew by appending.
    """
    kept = len(before.classes)
    if not kept:
        return 0, 0
    at_fields, at_extras = _header(fields)[1], _header(extras)[1]
    # Where the previous items start: the first one after the header; the
    # next few read only when the list is not the previous one appended to.
    starts = [_header(before.fields)[1]], [_header(before.extras)[1]]
    for dropped in range(min(_DROPS, kept - 1) + 1):
        k = kept - dropped
        if k > len(classes) or classes[:k] != before.classes[dropped:]:
            continue
        if dropped >= len(starts[0]):
            starts = _item_starts(before.fields, _DROPS), _item_starts(before.extras, _DROPS)
        old_fields = memoryview(before.fields)[starts[0][dropped] :]
        old_extras = memoryview(before.extras)[starts[1][dropped] :]
        if fields.startswith(old_fields, at_fields) and extras.startswith(old_extras, at_extras):
            return dropped, k
    return 0, 0


class Memo:
    """Content of list items -> the serializer's bytes of them."""

    def __init__(self, budget: int) -> None:
        self._bytes: Generations[tuple[type, bytes], bytes] = Generations(
            budget, lambda key, encoded: len(key[1]) + len(encoded)
        )
        self._classes: dict[type, bool] = {}

    def serialize(
        self, serde: Any, items: list[Any], previous: tuple[Contents, bytes] | None = None
    ) -> tuple[bytes, Contents] | None:
        """The serializer's msgpack bytes of the list ``items`` and its contents.

        ``previous`` is an earlier version's contents with its bytes (the
        parent's, made by this method): the run of its items this list
        starts with, unchanged, takes its bytes from it. None when the memo
        does not apply (another serializer, a short list, an item it cannot
        key, or a serializer that did not write msgpack for the items that
        missed): serialize the list whole then.
        """
        if (
            len(items) < _MIN_ITEMS
            or self._classes.get(type(items[-1])) is False  # dicts and the like: at once
            or not isinstance(serde, JsonPlusSerializer)
            or type(serde).dumps_typed is not JsonPlusSerializer.dumps_typed
            or not self._bytes.budget
        ):
            return None
        classes = tuple(map(type, items))
        kinds = frozenset(classes)
        eligibility = self._classes
        for cls in kinds:
            eligible = eligibility.get(cls)
            if eligible is None:
                eligible = eligibility[cls] = _eligible(cls)
            if not eligible:
                return None
        packb = ormsgpack.packb
        # Two lists made in C, not a container per item: allocating one each made
        # the collector run during most puts of a long conversation.
        try:
            fields = packb(list(map(_FIELDS, items)), option=STRICT)
            extras = packb(list(map(_EXTRAS, items)), option=STRICT)
        except TypeError:  # a value of another type than plain data: not keyed
            return None
        dropped, same = (0, 0) if previous is None else _kept(classes, fields, extras, previous[0])
        keys = [
            (type(item), packb([item.__dict__, item.__pydantic_extra__], option=STRICT))
            for item in items[same:]
        ]
        known = self._bytes
        parts: list[bytes | None] = known.get_many(keys)
        missed = [index for index, part in enumerate(parts) if part is None]
        if missed:
            kind, data = serde.dumps_typed([items[same + index] for index in missed])
            if kind != "msgpack":
                return None
            fresh = split(bytes(data))
            if fresh is None or len(fresh) != len(missed):
                return None
            for index, encoded in zip(missed, fresh, strict=True):
                parts[index] = encoded
                known.put(keys[index], encoded)
        head = header(len(items))
        joined: list[Any] = [head]
        starts = array("q", [len(head)])
        if same:
            before, data = previous  # type: ignore[misc]  # same > 0 only with a previous
            old = before.starts
            shift = len(head) - old[dropped]
            joined.append(memoryview(data)[old[dropped] :])
            starts = array("q", map((shift).__add__, old[dropped : dropped + same + 1]))
        filled: list[bytes] = parts  # type: ignore[assignment]  # every part is filled by now
        joined += filled
        # accumulate() yields the start it is given first: the last one, popped.
        starts.extend(accumulate(map(len, filled), initial=starts.pop()))
        return b"".join(joined), Contents(classes, fields, extras, starts, kinds)
