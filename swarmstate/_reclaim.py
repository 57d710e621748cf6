"""What a store's ``reclaim()`` gave back: one report type for every backend."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["ReclaimReport"]


@dataclasses.dataclass(frozen=True)
class ReclaimReport:
    """What :meth:`~swarmstate.BaseStore.reclaim` gave back to the file system or the server.

    Attributes:
        backend: The store's class name (``"Store"``, ``"DiskStore"``,
            ``"PostgresStore"``).
        bytes_before: Size of the store's storage before: the database file
            and its ``-wal`` (DiskStore), or the total size of the schema's
            tables with their indexes and TOAST (PostgresStore); 0 in memory.
        bytes_after: The same size afterwards.
        pages_freed: Pages given back. DiskStore: database pages removed
            from the file; PostgresStore: the pages (``block_size``) the
            tables shrank by.
        pages_left: Free pages still inside the file that this call could
            not give back (DiskStore; 0 elsewhere): a file created before
            incremental reclaim needs ``reclaim(full=True)`` once.
        full: Whether the store was rewritten whole (DiskStore's ``VACUUM``).
        complete: Whether everything reclaimable was given back: no free page
            left and the ``-wal`` truncated (DiskStore). False when a reader
            kept the log in use or the file needs ``full=True``; ``note``
            says which.
        steps: Short write transactions run (DiskStore's incremental steps,
            or one ``VACUUM`` per table on PostgreSQL).
        longest_step_seconds: The longest of them: about as long as a
            concurrent writer could have waited for one step.
        seconds: Time the whole call took.
        note: One line on what was not given back and what to do, or ``""``.
    """

    backend: str
    bytes_before: int
    bytes_after: int
    pages_freed: int = 0
    pages_left: int = 0
    full: bool = False
    complete: bool = True
    steps: int = 0
    longest_step_seconds: float = 0.0
    seconds: float = 0.0
    note: str = ""

    @property
    def bytes_freed(self) -> int:
        """``bytes_before - bytes_after``: negative if concurrent writes grew the store more."""
        return self.bytes_before - self.bytes_after

    def as_dict(self) -> dict[str, Any]:
        """Every field, plus ``bytes_freed``: a JSON-ready document."""
        doc = dataclasses.asdict(self)
        doc["bytes_freed"] = self.bytes_freed
        return doc
