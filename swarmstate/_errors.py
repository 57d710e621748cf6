"""The exceptions swarmstate raises.

Every error derives from :class:`SwarmStateError` and also from the builtin it
resembles, so ``except TypeError`` keeps working for code that does not know
about swarmstate::

    SwarmStateError (Exception)
    ├── InvalidKeyError (TypeError)          a name (namespace, key, prefix, bound) is
    │                                        not a str, or has a lone surrogate
    ├── UnsupportedTypeError (TypeError)     value holds a type the codec refuses
    ├── ValueOutOfRangeError (ValueError)    int outside msgpack's 64-bit range
    ├── DecodeError (ValueError)             bytes are not a valid swarmstate value
    │   └── CorruptDataError                 a stored checkpoint cannot be read back
    ├── InvalidArgumentError (ValueError)    malformed argument (batch entry, limit,
    │                                        reverse, max_history, an option)
    ├── SnapshotError (ValueError)           snapshot from another store (or a copy
    │                                        of it), or evicted
    ├── StoreClosedError (RuntimeError)      the store was closed
    ├── ConflictError (RuntimeError)         a set_many requirement did not hold
    │   ├── ThreadDeletedError               a write to a thread deleted meanwhile
    │   ├── CheckpointDeletedError           a checkpoint read was deleted before
    │   │                                    what it needs was read
    │   └── FencedError                      a write without the newest claim's token
    ├── MissingDependencyError (ImportError) an optional extra is not installed
    └── StorageError (OSError)               the backing file or server failed
        ├── IncompatibleStoreError           foreign, torn or newer-schema storage
        └── ReadOnlyStoreError (PermissionError) a write through a read-only store
"""

from __future__ import annotations


class SwarmStateError(Exception):
    """Root of every exception raised by swarmstate."""


class InvalidKeyError(SwarmStateError, TypeError):
    """A namespace, key, prefix or range bound was not a ``str`` with a UTF-8 form."""


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
    """An argument has the wrong shape, type or range (a batch entry, a limit, a flag)."""


class SnapshotError(SwarmStateError, ValueError):
    """A snapshot cannot be used here: another store's, or evicted by ``max_history``."""


class StoreClosedError(SwarmStateError, RuntimeError):
    """An operation was attempted on a closed store."""


class ConflictError(SwarmStateError, RuntimeError):
    """A ``set_many(require=...)`` condition did not hold (the store changed); nothing written."""


class ThreadDeletedError(ConflictError):
    """A checkpoint write names a parent (or checkpoint) of a thread that was deleted.

    The late writes of a run still going when its thread was deleted are
    refused, so the thread does not come back. A new run under the same id
    (no parent checkpoint) starts afresh.
    """


class CheckpointDeletedError(ConflictError):
    """A checkpoint a read had found was deleted before the rest of what it needs was read.

    Raised where skipping it is not possible: ``get_delta_channel_history``
    for a checkpoint LangGraph already holds (``graph.get_state_history``
    lists every checkpoint first, then rebuilds each one's ``DeltaChannel``
    values) that retention, ``prune`` or ``delete_thread`` deleted
    meanwhile. Its values are not returned short; read the thread again.
    """


class FencedError(ConflictError):
    """A write to a claimed thread did not carry the newest claim's fencing token."""


class MissingDependencyError(SwarmStateError, ImportError):
    """An optional dependency (an extra) is not installed."""


class StorageError(SwarmStateError, OSError):
    """The backing storage (file or server) could not be opened or failed."""


class IncompatibleStoreError(StorageError):
    """The storage was written by something else, is damaged, or has a newer schema."""


class ReadOnlyStoreError(StorageError, PermissionError):
    """A write was attempted through a store opened read-only."""
