"""Stored models decoded by LangGraph's serializer once per content, rebuilt cheaply after.

Reading a conversation is decoding its messages: LangGraph's serializer
revives each stored pydantic model by calling its class with the stored
fields, so every read validates every message again (most of a long
thread's ``get_state``). The same stored bytes always make
the same model, so this module remembers, per stored model, what the
serializer made of it, and rebuilds later copies directly.

It is exact, checked on the serializer's own result, not assumed from the
class:

* a stored model (LangGraph's msgpack extension for pydantic v2: module,
  class name, fields) is decoded by the serializer's own extension hook the
  first two times it is read (one read that meets it several times counts
  once: it is marked when the read ends), and that object is returned;
* at the second read its *shape* is remembered, only if rebuilding is
  provably the same object: the class is a pydantic model with no state
  outside ``__dict__`` and pydantic's own slots, no private attributes, no
  extra fields; and ``__dict__`` packed with every passthrough option of
  ormsgpack (exact builtin types, key order) is byte for byte the stored
  fields packed the same way, i.e. validating changed nothing, no type, no
  value, no order (a value read once costs what it costs without this);
* a later read of the same bytes unpacks the stored fields (fresh objects,
  so nothing is shared between two reads or with this cache) and sets them
  as the new instance's ``__dict__``, with a copy of the fields-set the
  serializer's object had.

Anything else (another extension, a model whose validation converts a value,
a nested model, another serializer, or one without the extension hook this
reads through) is decoded by the serializer each time. Shapes are kept per
serializer configuration (class, msgpack allowlist, custom hook): a model one
allowlist does not allow comes back as its fields there, as always.
It assumes what the serializer's own results already rely on: that
constructing a model from the same fields gives the same model. A model
whose construction has effects outside the instance (a counter, a registry)
sees them once per distinct stored model, not once per read.

Bounded by bytes, as two generations, like :mod:`.memo`; lookups take no
lock (a race costs at most a miss).
"""

from __future__ import annotations

import weakref
from typing import Any, Final, NamedTuple

import ormsgpack
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from pydantic import BaseModel

from swarmstate.integrations.langgraph.memo import STRICT, Generations

_SNAPSHOT: Any  # what LangGraph's serializer decodes its snapshot extension to
try:
    from langgraph.checkpoint.serde.types import _DeltaSnapshot as _SNAPSHOT
except ImportError:  # a LangGraph without DeltaChannel snapshots: nothing to rebuild
    _SNAPSHOT = None

__all__ = ["Reviver", "msgpack_as_jsonplus"]

_EXT_PYDANTIC_V2: Final = 5  # LangGraph's msgpack extension code for a pydantic v2 model
_EXT_DELTA_SNAPSHOT: Final = 7  # ... and for a DeltaChannel snapshot (a value around a value)
_UNPACK: Final = ormsgpack.OPT_NON_STR_KEYS  # the options LangGraph's serializer reads with
_BASE_SLOTS: Final = frozenset(BaseModel.__slots__)
_ENTRY_COST: Final = 200  # bytes a remembered shape costs besides its key
_TOKENS_MAX: Final = 8
_METHOD: Final = b"\xb3model_validate_json"  # the last item of a stored model, packed
_new = object.__new__
_set = object.__setattr__


class _Shape(NamedTuple):
    cls: type
    fields_set: frozenset[str]
    extra: bool  # ``__pydantic_extra__`` is ``{}`` (an ``extra="allow"`` model), else None


_NEW: Final = object()  # not met before
_SEEN: Final = object()  # met once
_Shapes = Generations[bytes, Any]  # a _Shape, _SEEN, or None (always the serializer)


class Reviver:
    """Decodes the serializer's msgpack values, rebuilding known stored models directly."""

    def __init__(self, budget: int) -> None:
        self._budget = budget
        # Per serializer configuration: what a stored model decodes to depends
        # on the serializer's allowlist (a model it does not allow comes back
        # as its fields), and LangGraph clones the serializer per graph call
        # when its strict mode is on.
        self._shapes: dict[object, _Shapes] = {}
        self._tokens: weakref.WeakKeyDictionary[Any, object] = weakref.WeakKeyDictionary()
        self._classes: dict[type, bool] = {}
        self._serializers: dict[type, bool] = {}

    def loads(self, serde: Any, pair: tuple[str, bytes]) -> Any:
        """``serde.loads_typed(pair)``, with known stored models rebuilt instead of validated."""
        if pair[0] != "msgpack" or not self._budget:
            return serde.loads_typed(pair)
        hook = self._hook(serde)
        if hook is None:
            return serde.loads_typed(pair)
        shapes = self._shapes_of(serde)
        known = shapes.get
        met: list[bytes] = []  # stored models met for the first time, marked after the read

        def ext(code: int, data: bytes) -> Any:
            if code == _EXT_PYDANTIC_V2:
                shape = known(data, _NEW)
                if type(shape) is _Shape:
                    obj: Any = _new(shape.cls)
                    _set(obj, "__dict__", ormsgpack.unpackb(data, option=_UNPACK)[2])
                    _set(obj, "__pydantic_fields_set__", set(shape.fields_set))
                    _set(obj, "__pydantic_extra__", {} if shape.extra else None)
                    _set(obj, "__pydantic_private__", None)
                    return obj
                obj = hook(code, data)  # exactly what the serializer does with it
                # Learned at its second read: a value read once costs about what
                # it costs without this cache (a lookup per model, one mark per read).
                if shape is _NEW:
                    met.append(data)
                elif shape is _SEEN:
                    shapes.put(data, self._shape(obj, data))  # None: the serializer's, always
                return obj
            if code == _EXT_DELTA_SNAPSHOT and _SNAPSHOT is not None:
                # A DeltaChannel's snapshot: its value holds the messages.
                return _SNAPSHOT(ormsgpack.unpackb(data, ext_hook=ext, option=_UNPACK))
            return hook(code, data)

        value = ormsgpack.unpackb(pair[1], ext_hook=ext, option=_UNPACK)
        if met:
            marks = dict.fromkeys(met, _SEEN)
            shapes.put_many(marks, sum(map(len, marks)) + _ENTRY_COST * len(marks))
        return value

    def _hook(self, serde: Any) -> Any:
        """The extension hook ``serde`` reads msgpack with, or None if it reads otherwise."""
        kind = type(serde)
        applies = self._serializers.get(kind)
        if applies is None:
            # msgpack reads must be JsonPlusSerializer's: one unpackb whose
            # extension hook decides each extension on its own.
            mro = kind.__mro__
            applies = self._serializers[kind] = isinstance(serde, JsonPlusSerializer) and all(
                "loads_typed" not in vars(c)
                or getattr(vars(c)["loads_typed"], _DELEGATES, False) is True
                for c in mro[: mro.index(JsonPlusSerializer)]
            )
        return getattr(serde, "_unpack_ext_hook", None) if applies else None

    def _shapes_of(self, serde: Any) -> _Shapes:
        token = self._tokens.get(serde)
        if token is None:
            token = self._tokens[serde] = _token(serde)
        shapes = self._shapes.get(token)
        if shapes is None:
            if len(self._shapes) >= _TOKENS_MAX:
                self._shapes.clear()
            shapes = self._shapes[token] = Generations(
                self._budget, lambda data, _: len(data) + _ENTRY_COST
            )
        return shapes

    def _shape(self, obj: Any, data: bytes) -> _Shape | None:
        cls = type(obj)
        if not self._plain(cls):
            return None
        extra = obj.__pydantic_extra__
        if obj.__pydantic_private__ is not None or extra not in (None, {}):
            return None
        fields = _fields(data)
        try:
            if fields is None or ormsgpack.packb(obj.__dict__, option=STRICT) != fields:
                return None
        except TypeError:  # a value of another type than plain data
            return None
        return _Shape(cls, frozenset(obj.__pydantic_fields_set__), extra is not None)

    def _plain(self, cls: type) -> bool:
        """Whether a ``cls`` instance's whole state is ``__dict__`` and pydantic's slots."""
        plain = self._classes.get(cls)
        if plain is None:
            plain = self._classes[cls] = issubclass(cls, BaseModel) and all(
                set(_slots(c)) <= _BASE_SLOTS for c in cls.__mro__
            )
        return plain


_DELEGATES: Final = "_swarmstate_msgpack_as_jsonplus"


def msgpack_as_jsonplus(method: Any) -> Any:
    """Mark a ``loads_typed`` override that hands msgpack reads to ``JsonPlusSerializer``."""
    setattr(method, _DELEGATES, True)
    return method


def _token(serde: Any) -> object:
    """What, besides its class, decides how ``serde`` decodes a stored model."""
    try:
        allowed = serde._allowed_msgpack_modules
        custom = serde._unpack_ext_hook if serde._custom_unpack_ext_hook else None
    except AttributeError:  # another version of the serializer: this instance alone
        return (type(serde), id(serde), serde)
    if isinstance(allowed, set):
        allowed = frozenset(allowed)
    return (type(serde), allowed, custom)


def _fields(data: bytes) -> bytes | None:
    """The stored fields of a model extension, as packed, or None if it is not that shape.

    LangGraph packs ``(module, class name, fields, "model_validate_json")``:
    an array of four, two strings, the fields, and that method name last.
    """
    if data[:1] != b"\x94" or not data.endswith(_METHOD):
        return None
    at = 1
    for _ in range(2):  # skip the module and the class name
        head = data[at] if at < len(data) else -1
        if 0xA0 <= head <= 0xBF:
            at += 1 + (head & 0x1F)
        elif head == 0xD9:
            at += 2 + data[at + 1]
        elif head == 0xDA:
            at += 3 + int.from_bytes(data[at + 1 : at + 3], "big")
        else:
            return None
    stop = len(data) - len(_METHOD)
    return data[at:stop] if at < stop else None


def _slots(cls: type) -> tuple[str, ...]:
    slots = vars(cls).get("__slots__", ())
    return (slots,) if isinstance(slots, str) else tuple(slots)
