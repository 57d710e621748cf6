"""The exceptions swarmstate raises.

Every error derives from :class:`SwarmStateError` and also from the builtin it
resembles, so ``except TypeError`` keeps working for code that does not know
about swarmstate::

    SwarmStateError (Exception)
    ├── InvalidKeyError (TypeError)          namespace or key is not a str
    ├── UnsupportedTypeError (TypeError)     value holds a type the codec refuses
    ├── ValueOutOfRangeError (ValueError)    int outside msgpack's 64-bit range
    ├── DecodeError (ValueError)             bytes are not a valid swarmstate value
    │   └── CorruptDataError                 a stored checkpoint cannot be read back
    ├── InvalidArgumentError (ValueError)    malformed argument (batch entry, limit)
    ├── SnapshotError (ValueError)           snapshot from another store, or evicted
    ├── StoreClosedError (RuntimeError)      the store was closed
    ├── MissingDependencyError (ImportError) an optional extra is not installed
    └── StorageError (OSError)               the backing file or server failed
        ├── IncompatibleStoreError           foreign, torn or newer-schema storage
        └── ReadOnlyStoreError (PermissionError) a write through a read-only store
"""

from __future__ import annotations


class SwarmStateError(Exception):
    """Root of every exception raised by swarmstate."""


class InvalidKeyError(SwarmStateError, TypeError):
    """A namespace or key was not a ``str``."""


class UnsupportedTypeError(SwarmStateError, TypeError):
    """A value contains a type the codec does not store."""


class ValueOutOfRangeError(SwarmStateError, ValueError):
    """An ``int`` does not fit msgpack's 64-bit integer range."""


class DecodeError(SwarmStateError, ValueError):
    """Bytes handed to :func:`swarmstate.loads` are not a valid value."""


class CorruptDataError(DecodeError):
    """Stored checkpoint data is damaged, truncated, or not what the saver wrote.

    The message names the thread, checkpoint namespace and checkpoint id.
    """


class InvalidArgumentError(SwarmStateError, ValueError):
    """An argument has the wrong shape or range (a batch entry, a limit)."""


class SnapshotError(SwarmStateError, ValueError):
    """A snapshot cannot be used here: another store's, or evicted by ``max_history``."""


class StoreClosedError(SwarmStateError, RuntimeError):
    """An operation was attempted on a closed store."""


class MissingDependencyError(SwarmStateError, ImportError):
    """An optional dependency (an extra) is not installed."""


class StorageError(SwarmStateError, OSError):
    """The backing storage (file or server) could not be opened or failed."""


class IncompatibleStoreError(StorageError):
    """The storage was written by something else, is damaged, or has a newer schema."""


class ReadOnlyStoreError(StorageError, PermissionError):
    """A write was attempted through a store opened read-only."""


def check_key(namespace: object, key: object) -> None:
    """Raise :class:`InvalidKeyError` unless both parts of a key are valid ``str``."""
    check_namespace(namespace)
    check_namespace(key, "key")


def check_namespace(namespace: object, what: str = "namespace") -> None:
    """Raise :class:`InvalidKeyError` unless ``namespace`` is a str every backend can store.

    A lone surrogate (``"\\ud800"``) has no UTF-8 form, so no file or server
    could store it; it is refused everywhere, not only by the durable backends.
    """
    if type(namespace) is not str:
        raise InvalidKeyError(
            f"{what} must be a str, got {type(namespace).__name__}: {namespace!r}"
        )
    if not namespace.isascii():
        try:
            namespace.encode("utf-8")
        except UnicodeEncodeError:
            raise InvalidKeyError(
                f"{what} {namespace!r} contains a lone surrogate, which has no UTF-8 "
                "form; decode your input with errors='replace' or 'strict'"
            ) from None
