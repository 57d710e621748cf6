"""How PostgresStore passes names: UTF-8 bytes, index forms of long names, batch arrays.

From schema version 6 a name longer than :data:`~.schema.HEAD_BYTES`
is looked up in its index form and written with its long form beside it
(see :mod:`swarmstate.backends.postgres.schema`); shorter names are both.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence

from swarmstate._checks import Row
from swarmstate.backends.postgres.schema import HEAD_BYTES

__all__ = [
    "Arrays",
    "any_long",
    "dec",
    "enc",
    "has_long_names",
    "index_form",
    "long_form",
    "put_many_params",
    "with_long_forms",
]

Arrays = tuple[list[bytes], list[bytes], list[bytes], bool]
"""``put_many``'s arguments: namespaces, keys, values, if_absent."""


def enc(name: str) -> bytes:
    """A name's UTF-8 bytes (byte order is code point order)."""
    return name.encode("utf-8", "surrogatepass")


def dec(data: bytes) -> str:
    """The name stored as ``data``."""
    return bytes(data).decode("utf-8", "surrogatepass")


def index_form(name: bytes) -> bytes:
    """A long name's index form: its head, then its SHA-256."""
    return name[:HEAD_BYTES] + hashlib.sha256(name).digest()


def long_form(name: bytes) -> bytes | None:
    """The name, when its index form is not the name itself; else None."""
    return name if len(name) > HEAD_BYTES else None


def put_many_params(rows: Sequence[Row], if_absent: bool) -> Arrays | None:
    """Arguments of ``put_many`` for a checked batch, keys made distinct; None if empty."""
    encoded: dict[tuple[bytes, bytes], bytes] = {}
    for (ns, key), data in rows:
        pair = (enc(ns), enc(key))
        if if_absent:
            encoded.setdefault(pair, data)  # the first of duplicates is the one inserted
        else:
            encoded[pair] = data  # later items win
    if not encoded:
        return None
    return [ns for ns, _ in encoded], [key for _, key in encoded], list(encoded.values()), if_absent


def any_long(names: Iterable[str | bytes | None]) -> bool:
    """Whether one of ``names`` (or of their UTF-8 bytes) is longer than its index form keeps."""
    for name in names:
        if name is None:
            continue
        if type(name) is str:
            # Four bytes at most per character: most names need no encoding here.
            if len(name) * 4 <= HEAD_BYTES:
                continue
            name = enc(name)
        if len(name) > HEAD_BYTES:
            return True
    return False


def has_long_names(*batches: Arrays | None) -> bool:
    """Whether a name of these batches is longer than its index form keeps."""
    return any(
        batch is not None and max(map(len, batch[0] + batch[1])) > HEAD_BYTES for batch in batches
    )


def with_long_forms(
    batch: Arrays | None,
) -> tuple[list[bytes], list[bytes], list[bytes], list[bytes | None], list[bytes | None]]:
    """``(ns, key, value)`` arrays in index form, and the long forms beside them."""
    if batch is None:
        return [], [], [], [], []
    names, keys, values, _ = batch
    return (
        [n if len(n) <= HEAD_BYTES else index_form(n) for n in names],
        [k if len(k) <= HEAD_BYTES else index_form(k) for k in keys],
        values,
        [long_form(n) for n in names],
        [long_form(k) for k in keys],
    )
