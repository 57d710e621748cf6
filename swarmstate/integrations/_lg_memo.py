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
  pack, and the item is serialized as usual.

The key is the class and those values packed to msgpack bytes: equal keys
mean equal types, equal values and equal key order, so equal serializer
bytes. Anything else is serialized, in one serializer call for all the
items that missed.

Bounded by bytes, as two generations: hits move an entry to the young one,
and when it is full the old one is dropped. Lookups take no lock (a race
costs at most a miss).
"""

from __future__ import annotations

from typing import Any, Final

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from swarmstate.integrations import _lg_lists as L

__all__ = ["Memo"]

_STRICT: Final = (
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


class Memo:
    """Content of list items -> the serializer's bytes of them."""

    def __init__(self, budget: int) -> None:
        self._half = budget // 2
        self._young: dict[tuple[type, bytes], bytes] = {}
        self._old: dict[tuple[type, bytes], bytes] = {}
        self._young_size = 0
        self._classes: dict[type, bool] = {}

    def serialize(self, serde: Any, items: list[Any]) -> bytes | None:
        """The serializer's msgpack bytes of the list ``items``, or None to serialize it whole.

        None when the memo does not apply (another serializer, a short list,
        an item it cannot key, or a serializer that did not write msgpack
        for the items that missed).
        """
        if (
            not isinstance(serde, JsonPlusSerializer)
            or type(serde).dumps_typed is not JsonPlusSerializer.dumps_typed
            or len(items) < _MIN_ITEMS
            or not self._half
        ):
            return None
        classes = self._classes
        for cls in {type(item) for item in items}:
            eligible = classes.get(cls)
            if eligible is None:
                eligible = classes[cls] = _eligible(cls)
            if not eligible:
                return None
        packb, strict = ormsgpack.packb, _STRICT
        try:
            keys = [
                (type(item), packb([item.__dict__, item.__pydantic_extra__], option=strict))
                for item in items
            ]
        except TypeError:  # a value of another type than plain data: not keyed
            return None
        young, old = self._young, self._old
        parts: list[bytes | None] = [young.get(key) for key in keys]
        missed = [index for index, part in enumerate(parts) if part is None]
        if missed:
            for index in missed:
                found = old.get(keys[index])
                if found is not None:
                    parts[index] = found
                    self._keep(keys[index], found)
            missed = [index for index in missed if parts[index] is None]
        if missed:
            kind, data = serde.dumps_typed([items[index] for index in missed])
            if kind != "msgpack":
                return None
            fresh = L.split(bytes(data))
            if fresh is None or len(fresh) != len(missed):
                return None
            for index, encoded in zip(missed, fresh, strict=True):
                parts[index] = encoded
                self._keep(keys[index], encoded)
        return L.header(len(items)) + b"".join(parts)  # type: ignore[arg-type]

    def _keep(self, key: tuple[type, bytes], encoded: bytes) -> None:
        if self._young_size > self._half:
            self._old, self._young, self._young_size = self._young, {}, 0
        self._young[key] = encoded
        self._young_size += len(key[1]) + len(encoded)
