"""DiskStore: the store contract in one SQLite file (apsw, WAL), durable snapshots.

``from swarmstate.backends.disk import DiskStore`` is the public import; the
modules of this package are how it works, each named for its part.
"""

from swarmstate.backends.disk.store import DiskStore

__all__ = ["DiskStore"]
