"""The argument checks of the store contract, in one place.

:class:`~swarmstate.BaseStore` runs these before calling any backend
primitive, so the same bad input gets the same exception, with the same
message, on every backend. The order they run in is documented in
:mod:`swarmstate._base`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any, Final, NamedTuple
from urllib.parse import unquote

from swarmstate._codec import encode
from swarmstate._errors import ConflictError, InvalidArgumentError, InvalidKeyError

__all__ = [
    "ABSENT",
    "MAX_LIMIT",
    "MAX_TAG_BYTES",
    "MAX_VALUE_BYTES",
    "NO_TAGS",
    "PRESENT",
    "TAG_NAMES",
    "Absent",
    "Bound",
    "Checked",
    "Condition",
    "Empty",
    "Holds",
    "Limit",
    "Pair",
    "Present",
    "Requirement",
    "Row",
    "TagPair",
    "TagRange",
    "Tags",
    "Transaction",
    "WriteResult",
    "check_flag",
    "check_key",
    "check_max_history",
    "check_name",
    "check_range",
    "check_tag",
    "check_tag_value",
    "checked_pairs",
    "checked_requirements",
    "checked_tagged",
    "checked_transaction",
    "conflict",
    "encoded_rows",
    "hide_password",
    "quick_transaction",
    "unmet",
]

Pair = tuple[str, str]
"""A ``(namespace, key)``."""
Row = tuple[Pair, bytes]
"""A checked, encoded batch entry: ``((namespace, key), stored bytes)``."""
Bound = str | None
"""A range bound: a name, or None for no bound."""
Limit = int | None
"""How many entries a range returns at most: ``0 .. MAX_LIMIT``, or None for all."""

MAX_LIMIT: Final = 2**63 - 1
"""The largest ``limit`` a range takes: what SQLite and PostgreSQL count to."""

MAX_VALUE_BYTES: Final = 1_000_000_000
"""The most bytes one stored value holds on a durable backend: SQLite's length
limit for a blob, under PostgreSQL's 1 GB limit for a field. Readers of stored
data refuse a claim past it (a compressed size, the bytes a value's parts
join to) before allocating anything, so planted bytes cannot make them grow."""


class _Expectation:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def __repr__(self) -> str:
        return self._name


ABSENT: Final[Any] = _Expectation("ABSENT")
"""``set_many(require=...)``: the key must hold no value."""
PRESENT: Final[Any] = _Expectation("PRESENT")
"""``set_many(require=...)``: the key must hold a value (any)."""

Requirement = tuple[Pair, Any]
"""A checked condition: ``((namespace, key), ABSENT | PRESENT | stored bytes)``."""


# -- the transaction primitive: store.write(Transaction(...)) -------------------


@dataclass(frozen=True, slots=True)
class Absent:
    """Condition of a :class:`Transaction`: ``(namespace, key)`` holds no value."""

    namespace: str
    key: str


@dataclass(frozen=True, slots=True)
class Present:
    """Condition of a :class:`Transaction`: ``(namespace, key)`` holds a value (any)."""

    namespace: str
    key: str


@dataclass(frozen=True, slots=True)
class Holds:
    """Condition of a :class:`Transaction`: ``(namespace, key)`` holds exactly ``data``.

    ``data`` is the stored msgpack bytes, as ``items(raw=True)`` or
    :func:`~swarmstate.dumps` gives them.
    """

    namespace: str
    key: str
    data: bytes

    def __repr__(self) -> str:
        # A value may be large: the condition is named by its key and size.
        data = f"<{len(self.data)} bytes>" if type(self.data) is bytes else repr(self.data)
        return f"Holds(namespace={self.namespace!r}, key={self.key!r}, data={data})"


@dataclass(frozen=True, slots=True)
class Empty:
    """Condition of a :class:`Transaction`: no key of ``namespace`` in ``[start, stop)``.

    ``start`` is inclusive, ``stop`` exclusive, and None leaves that side
    unbounded (``Empty(ns)``: the namespace holds nothing). Keys compare as
    in :meth:`~swarmstate.BaseStore.keys`, by code point.
    """

    namespace: str
    start: str | None = None
    stop: str | None = None


Condition = Absent | Present | Holds | Empty
"""What a :class:`Transaction` may require before it writes."""

TAG_NAMES: Final = ("order", "group")
"""The tags an entry may carry, as :meth:`~swarmstate.BaseStore.tagged` names them."""

MAX_TAG_BYTES: Final = 512
"""The most UTF-8 bytes a tag value holds: on PostgreSQL a tag is indexed with
the entry's namespace and key (up to 1,056 bytes each in their index form),
and the whole index row must stay under the server's 2,704 bytes."""


@dataclass(frozen=True, slots=True)
class Tags:
    """The ordered secondary keys of an entry, the optional 4th element of a set.

    An entry carries at most one value per tag; None leaves that tag off.
    :meth:`~swarmstate.BaseStore.tagged` lists live entries in the order of
    one tag's values (ties by namespace, then key). Tags belong to the entry:
    a set replaces them (a set without ``Tags`` leaves none), every delete
    removes them, and snapshots, ``restore`` and ``copy_prefix`` carry them.
    Values are strings of at most 512 UTF-8 bytes (:data:`MAX_TAG_BYTES`),
    compared by code point as keys are.
    """

    order: str | None = None
    group: str | None = None


TagPair = tuple[str | None, str | None]
"""A checked entry's tags: ``(order, group)``, each None when the entry has none."""
TagRange = tuple[str, Bound, Bound]
"""A checked tag delete: ``(tag, start, stop)``, the tag one of :data:`TAG_NAMES`."""
NO_TAGS: Final[TagPair] = (None, None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Transaction:
    """Conditions, then writes, that :meth:`~swarmstate.BaseStore.write` runs all or nothing.

    Every condition is checked first, against the store as it is before the
    transaction; if one does not hold, nothing is written and
    :class:`~swarmstate.ConflictError` names it. Otherwise the writes apply in
    this order: ``prefix_deletes`` (every entry whose namespace starts with
    one), then ``deletes`` (pairs), then ``sets``, so a key both deleted and
    set ends up set. ``tag_deletes`` run after the deletes and before the
    sets: they remove the entries live at that point whose tag value is in
    the range, and a set of the transaction is never removed by them.

    Args:
        conditions: :class:`Absent`, :class:`Present`, :class:`Holds` and
            :class:`Empty` conditions, all of which must hold.
        sets: ``(namespace, key, value)`` or ``(namespace, key, value, tags)``
            entries, ``tags`` a :class:`Tags`; a later one wins over an
            earlier one with the same key (with ``if_absent``, the first). An
            entry written without tags carries none, whatever it had before.
        deletes: ``(namespace, key)`` pairs to remove.
        prefix_deletes: Namespace prefixes whose entries are removed.
        tag_deletes: ``(tag, start, stop)`` ranges: every entry whose
            ``tag`` (``"order"`` or ``"group"``) has a value in ``[start,
            stop)`` is removed (None leaves that side unbounded).
        if_absent: Leave keys that hold a value untouched (insert-or-ignore),
            as ``set_many(if_absent=True)``.
        raw: Every value of ``sets`` is already msgpack bytes, stored as it
            is (as ``set_many(raw=True)``).
    """

    conditions: Iterable[Condition] = ()
    sets: Iterable[tuple[str, str, Any] | tuple[str, str, Any, Tags]] = ()
    deletes: Iterable[tuple[str, str]] = ()
    prefix_deletes: Iterable[str] = ()
    tag_deletes: Iterable[tuple[str, str | None, str | None]] = ()
    if_absent: bool = False
    raw: bool = False


class WriteResult(NamedTuple):
    """What :meth:`~swarmstate.BaseStore.write` did."""

    written: int
    """Entries of ``sets`` written, counted as :meth:`~swarmstate.BaseStore.set_many`
    counts them (with ``if_absent``, only those inserted)."""
    deleted: int
    """Entries removed by ``prefix_deletes``, ``deletes`` and ``tag_deletes``
    (each counted once)."""


class Checked(NamedTuple):
    """A transaction after its checks: names valid, values encoded, iterables materialized."""

    conditions: list[Condition]
    rows: list[Row]
    deletes: list[Pair]
    prefixes: list[str]
    if_absent: bool
    tags: list[TagPair] | None = None
    """Each row's tags, in the order of ``rows``; None when no row has any."""
    tag_deletes: list[TagRange] = []  # noqa: RUF012 - never mutated


# -- argument checks -----------------------------------------------------------


def check_name(name: object, what: str = "namespace") -> None:
    """Raise :class:`InvalidKeyError` unless ``name`` is a str every backend can store.

    A lone surrogate (``"\\ud800"``) has no UTF-8 form, so no file or server
    could store it; it is refused everywhere, not only by the durable backends.
    """
    if type(name) is not str:
        raise InvalidKeyError(f"{what} must be a str, got {type(name).__name__}: {name!r}")
    if not name.isascii():
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidKeyError(
                f"{what} {name!r} contains a lone surrogate, which has no UTF-8 "
                "form; decode your input with errors='replace' or 'strict'"
            ) from None


def check_key(namespace: object, key: object) -> None:
    """Raise :class:`InvalidKeyError` unless both parts of a key are valid names."""
    check_name(namespace)
    check_name(key, "key")


def check_flag(value: object, what: str) -> None:
    """Raise :class:`InvalidArgumentError` unless ``value`` is True or False."""
    if type(value) is not bool:
        raise InvalidArgumentError(f"{what} must be True or False, got {value!r}")


def check_max_history(max_history: object) -> None:
    """Raise :class:`InvalidArgumentError` unless ``max_history`` is None or a positive int."""
    if max_history is not None and (type(max_history) is not int or max_history < 1):
        raise InvalidArgumentError(
            f"max_history must be a positive int or None, got {max_history!r}"
        )


def check_range(
    namespace: object, start: object, stop: object, reverse: object, limit: object
) -> None:
    """The checks of ``keys``/``items``, with the common shapes decided inline."""
    if type(namespace) is not str or not namespace.isascii():
        check_name(namespace)
    if start is not None:
        check_name(start, "start")
    if stop is not None:
        check_name(stop, "stop")
    if type(reverse) is not bool:
        check_flag(reverse, "reverse")
    if limit is not None and (type(limit) is not int or not 0 <= limit <= MAX_LIMIT):
        raise InvalidArgumentError(
            f"limit must be None or an int from 0 to 2**63 - 1, got {limit!r}; "
            "pass None for no limit"
        )


def _iterate(values: Any, name: str, what: str) -> Iterator[Any]:
    """An iterator over ``values``, or :class:`InvalidArgumentError` naming the argument."""
    if not isinstance(values, (str, bytes)):
        try:
            return iter(values)
        except TypeError:
            pass
    raise InvalidArgumentError(
        f"{name} must be an iterable of {what}, got {type(values).__name__}: {values!r:.80}"
    )


def checked_pairs(pairs: Iterable[tuple[str, str]], name: str = "pairs") -> list[Pair]:
    """Materialize ``(namespace, key)`` pairs, each checked; raises before returning any."""
    checked: list[Pair] = []
    append = checked.append
    for pair in _iterate(pairs, name, "(namespace, key) pairs"):
        if type(pair) is tuple and len(pair) == 2:
            ns, key = pair
            if type(ns) is str and type(key) is str and ns.isascii() and key.isascii():
                append(pair)  # the common case decided inline
                continue
        if type(pair) not in (tuple, list) or len(pair) != 2:
            raise InvalidArgumentError(f"expected (namespace, key) pairs, got {pair!r}")
        check_key(pair[0], pair[1])
        append((pair[0], pair[1]))
    return checked


def encoded_rows(
    items: Iterable[tuple[str, str, Any]], raw: bool, name: str = "items"
) -> list[Row]:
    """Check and encode a batch, entry by entry; raises before returning anything.

    Each entry's shape, namespace, key, then value: the first bad entry wins.
    """
    rows: list[Row] = []
    append = rows.append
    for entry in _iterate(items, name, "(namespace, key, value) tuples"):
        if type(entry) is tuple and len(entry) == 3:
            ns, key, value = entry
            if type(ns) is str and type(key) is str and ns.isascii() and key.isascii():
                # The common case decided inline.
                append(((ns, key), value if raw and type(value) is bytes else encode(value, raw)))
                continue
        if type(entry) not in (tuple, list) or len(entry) != 3:
            if name == "sets":
                raise InvalidArgumentError(
                    f"sets takes (namespace, key, value) or (namespace, key, value, Tags) "
                    f"tuples, got {entry!r}"
                )
            raise InvalidArgumentError(
                f"set_many takes (namespace, key, value) tuples, got {entry!r}"
            )
        ns, key, value = entry
        check_key(ns, key)
        append(((ns, key), encode(value, raw)))
    return rows


def checked_requirements(require: Iterable[tuple[str, str, Any]]) -> list[Requirement]:
    """The conditions of ``set_many(require=...)``, each checked; raises before returning any."""
    checked: list[Requirement] = []
    for entry in _iterate(require, "require", "(namespace, key, expected) tuples"):
        if type(entry) is tuple and len(entry) == 3:
            ns, key, expected = entry
            if (
                type(ns) is str
                and type(key) is str
                and ns.isascii()
                and key.isascii()
                and (expected is ABSENT or expected is PRESENT or type(expected) is bytes)
            ):
                checked.append(((ns, key), expected))  # the common case decided inline
                continue
        if type(entry) not in (tuple, list) or len(entry) != 3:
            raise InvalidArgumentError(
                f"require takes (namespace, key, expected) tuples, got {entry!r}"
            )
        ns, key, expected = entry
        check_key(ns, key)
        if expected is not ABSENT and expected is not PRESENT and type(expected) is not bytes:
            raise InvalidArgumentError(
                "a requirement expects ABSENT, PRESENT or the stored bytes (raw msgpack), "
                f"got {type(expected).__name__} for ({ns!r}, {key!r})"
            )
        checked.append(((ns, key), expected))
    return checked


_PASSWORDS: Final = (
    # URL userinfo, up to the first "@" (as libpq reads it) and up to the last one
    re.compile(r"://[^:/?#@\s]*:(?P<secret>[^@/?#\s]*)@"),
    re.compile(r"://[^:/?#@\s]*:(?P<secret>[^/?#\s]*)@"),
    # a password= option (key=value text, quoted or not) or URL parameter
    re.compile(r"\bpassword\s*=\s*(?P<secret>'(?:[^'\\]|\\.)*'?|[^\s']\S*)", re.IGNORECASE),
)


def hide_password(text: str, conninfo: str) -> str:
    """``text`` with every copy of the password ``conninfo`` holds replaced by ``***``.

    A PostgreSQL connection string (a URL, or libpq ``key=value`` text) may
    hold a password, and libpq quotes a string it cannot parse in its error,
    so every message that may hold some of it passes through here. The
    password is found as libpq would find it (URL userinfo, a ``password=``
    option or URL parameter), quoted, unquoted and percent-decoded alike, so
    a string libpq refuses to parse gives it up too.
    """
    secrets: set[str] = set()
    for pattern in _PASSWORDS:
        for match in pattern.finditer(conninfo):
            found = match["secret"]
            bare = found.strip("'")
            unescaped = bare.replace("\\'", "'").replace("\\\\", "\\")
            for candidate in (found, bare, unescaped, bare.partition("&")[0]):
                secrets.update((candidate, unquote(candidate)))
    for secret in sorted(secrets - {""}, key=len, reverse=True):
        text = text.replace(secret, "***")
    return text


def checked_transaction(transaction: object) -> Checked:
    """The checks of :meth:`~swarmstate.BaseStore.write`; raises before returning anything.

    In order: the argument's type, the flags, each condition (its kind, then
    its names, then a :class:`Holds`'s bytes), the sets (entry by entry, as
    ``set_many`` checks its items), the deletes, then the prefixes.
    """
    if type(transaction) is not Transaction:
        raise InvalidArgumentError(
            "write takes a swarmstate.Transaction, got "
            f"{type(transaction).__name__}: {transaction!r:.80}"
        )
    check_flag(transaction.if_absent, "if_absent")
    check_flag(transaction.raw, "raw")
    conditions: list[Condition] = []
    for condition in _iterate(
        transaction.conditions, "conditions", "Absent, Present, Holds or Empty conditions"
    ):
        kind = type(condition)
        if kind is Absent or kind is Present or kind is Holds:
            check_key(condition.namespace, condition.key)
            if kind is Holds and type(condition.data) is not bytes:
                raise InvalidArgumentError(
                    "Holds takes the stored bytes (raw msgpack, as items(raw=True) returns "
                    f"them), got {type(condition.data).__name__} for "
                    f"({condition.namespace!r}, {condition.key!r})"
                )
        elif kind is Empty:
            check_name(condition.namespace)
            if condition.start is not None:
                check_name(condition.start, "start")
            if condition.stop is not None:
                check_name(condition.stop, "stop")
        else:
            raise InvalidArgumentError(
                "conditions takes Absent, Present, Holds or Empty conditions, got "
                f"{kind.__name__}: {condition!r:.80}"
            )
        conditions.append(condition)
    sets, tags = _split_tags(transaction.sets)
    rows = encoded_rows(sets, transaction.raw, "sets")
    deletes = checked_pairs(transaction.deletes, "deletes")
    prefixes: list[str] = []
    for prefix in _iterate(transaction.prefix_deletes, "prefix_deletes", "namespace prefixes"):
        check_name(prefix, "prefix")
        prefixes.append(prefix)
    ranges: list[TagRange] = []
    for entry in _iterate(transaction.tag_deletes, "tag_deletes", "(tag, start, stop) tuples"):
        if type(entry) not in (tuple, list) or len(entry) != 3:
            raise InvalidArgumentError(
                f"tag_deletes takes (tag, start, stop) tuples, got {entry!r:.80}"
            )
        tag, start, stop = entry
        check_tag(tag)
        for bound, what in ((start, "start"), (stop, "stop")):
            if bound is not None:
                check_tag_value(bound, what)
        ranges.append((tag, start, stop))
    return Checked(conditions, rows, deletes, prefixes, transaction.if_absent, tags, ranges)


def quick_transaction(transaction: Transaction) -> Checked | None:
    """:func:`checked_transaction` of the shape a checkpoint write has, in one pass; else None.

    Raw sets (3- or 4-tuples, ASCII names and tag values, bytes values) on
    ``Absent``/``Present`` conditions, in lists or tuples, with no deletes:
    the general checks cost more than the write itself for a few such rows.
    None for anything else, including anything the general checks would
    refuse, which then refuse it as they always did.
    """
    if (
        transaction.raw is not True
        or type(transaction.if_absent) is not bool
        or transaction.deletes
        or transaction.prefix_deletes
        or transaction.tag_deletes
    ):
        return None
    conditions, sets = transaction.conditions, transaction.sets
    if type(conditions) not in (list, tuple) or type(sets) not in (list, tuple) or not sets:
        return None
    for condition in conditions:
        kind = type(condition)
        if kind is not Absent and kind is not Present:
            return None
        assert isinstance(condition, Absent | Present)
        ns, key = condition.namespace, condition.key
        if type(ns) is not str or type(key) is not str or not (ns.isascii() and key.isascii()):
            return None
    rows: list[Row] = []
    tags: list[TagPair] = []
    tagged = False
    for entry in sets:
        if type(entry) is not tuple:
            return None
        if len(entry) == 4:
            ns, key, data, found = entry
            if type(found) is not Tags:
                return None
            pair = (found.order, found.group)
            for value in pair:
                if value is not None and (
                    type(value) is not str or not value.isascii() or len(value) > MAX_TAG_BYTES
                ):
                    return None
            tagged = tagged or pair != NO_TAGS
        elif len(entry) == 3:
            ns, key, data = entry
            pair = NO_TAGS
        else:
            return None
        if (
            type(ns) is not str
            or type(key) is not str
            or type(data) is not bytes
            or not (ns.isascii() and key.isascii())
        ):
            return None
        rows.append(((ns, key), data))
        tags.append(pair)
    return Checked(list(conditions), rows, [], [], transaction.if_absent, tags if tagged else None)


def check_tag(tag: object) -> None:
    """Raise :class:`InvalidArgumentError` unless ``tag`` names a tag (:data:`TAG_NAMES`)."""
    if type(tag) is not str or tag not in TAG_NAMES:
        raise InvalidArgumentError(f"tag must be 'order' or 'group', got {tag!r:.80}")


def check_tag_value(value: object, what: str) -> None:
    """Raise :class:`InvalidKeyError` unless ``value`` is a name of at most MAX_TAG_BYTES bytes."""
    check_name(value, what)
    assert isinstance(value, str)
    if len(value) * 4 > MAX_TAG_BYTES and len(value.encode()) > MAX_TAG_BYTES:
        raise InvalidKeyError(
            f"{what} has {len(value.encode())} UTF-8 bytes, over the {MAX_TAG_BYTES} "
            "a tag value holds; keep tag values short (an id, a time, not a document)"
        )


def _split_tags(sets: object) -> tuple[list[Any], list[TagPair] | None]:
    """A transaction's sets as ``(namespace, key, value)`` entries, and their checked tags.

    The tags are None when no set carries any, so a write without tags takes
    the paths it took before tags existed.
    """
    entries: list[Any] = []
    tags: list[TagPair] = []
    tagged = False
    for entry in _iterate(sets, "sets", "(namespace, key, value[, tags]) tuples"):
        if type(entry) in (tuple, list) and len(entry) == 4:
            found = entry[3]
            if type(found) is not Tags:
                raise InvalidArgumentError(
                    "the 4th element of a set must be a swarmstate.Tags, got "
                    f"{type(found).__name__}: {found!r:.80}"
                )
            if found.order is not None:
                check_tag_value(found.order, "tag order")
            if found.group is not None:
                check_tag_value(found.group, "tag group")
            entries.append((entry[0], entry[1], entry[2]))
            tags.append((found.order, found.group))
            tagged = tagged or found != _NO_TAGS
        else:
            entries.append(entry)
            tags.append(NO_TAGS)
    return entries, tags if tagged else None


_NO_TAGS: Final = Tags()


def checked_tagged(
    tag: object, start: object, stop: object, reverse: object, limit: object
) -> None:
    """The checks of :meth:`~swarmstate.BaseStore.tagged`: the tag, bounds, reverse, limit."""
    check_tag(tag)
    for bound, what in ((start, "start"), (stop, "stop")):
        if bound is not None:
            check_tag_value(bound, what)
    check_flag(reverse, "reverse")
    if limit is not None and (type(limit) is not int or not 0 <= limit <= MAX_LIMIT):
        raise InvalidArgumentError(
            f"limit must be None or an int from 0 to 2**63 - 1, got {limit!r}; "
            "pass None for no limit"
        )


def conflict(condition: Condition) -> ConflictError:
    """The error of a transaction whose ``condition`` did not hold."""
    return ConflictError(
        f"write required {condition!r}, which did not hold; the store changed since "
        "it was read: read again and retry"
    )


def unmet(require: list[Requirement], found: list[bytes | None]) -> tuple[Pair, str] | None:
    """The first requirement the stored values ``found`` break, with what was found; else None."""
    for (pair, expected), value in zip(require, found, strict=True):
        if expected is ABSENT:
            if value is not None:
                return pair, "a value, where none was required"
        elif value is None:
            return pair, "no value"
        elif expected is not PRESENT and value != expected:
            return pair, "other bytes than required"
    return None
