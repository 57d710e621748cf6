"""swarmstate: state and checkpointing for agent systems.

State keyed by ``(namespace, key)`` with snapshots that copy nothing, and
restore and diffs that cost the change, on memory, one SQLite file, or PostgreSQL; and a
LangGraph checkpointer over any of them.
"""

from swarmstate._base import BaseStore
from swarmstate._checks import (
    ABSENT,
    PRESENT,
    Absent,
    Empty,
    Holds,
    Present,
    Tags,
    Transaction,
    WriteResult,
)
from swarmstate._codec import Ext, dumps, loads
from swarmstate._errors import (
    CheckpointDeletedError,
    ConflictError,
    CorruptDataError,
    DecodeError,
    FencedError,
    IncompatibleStoreError,
    InvalidArgumentError,
    InvalidKeyError,
    MissingDependencyError,
    ReadOnlyStoreError,
    SnapshotError,
    StorageError,
    StoreClosedError,
    SwarmStateError,
    ThreadDeletedError,
    UnsupportedTypeError,
    ValueOutOfRangeError,
)
from swarmstate._reclaim import ReclaimReport
from swarmstate._snapshot import Diff, Snapshot
from swarmstate._transfer import transfer
from swarmstate.backends.memory import Store

__version__ = "0.1.0"

__all__ = [
    "ABSENT",
    "PRESENT",
    "Absent",
    "BaseStore",
    "CheckpointDeletedError",
    "ConflictError",
    "CorruptDataError",
    "DecodeError",
    "Diff",
    "Empty",
    "Ext",
    "FencedError",
    "Holds",
    "IncompatibleStoreError",
    "InvalidArgumentError",
    "InvalidKeyError",
    "MissingDependencyError",
    "Present",
    "ReadOnlyStoreError",
    "ReclaimReport",
    "Snapshot",
    "SnapshotError",
    "StorageError",
    "Store",
    "StoreClosedError",
    "SwarmStateError",
    "Tags",
    "ThreadDeletedError",
    "Transaction",
    "UnsupportedTypeError",
    "ValueOutOfRangeError",
    "WriteResult",
    "dumps",
    "loads",
    "transfer",
]
