"""PostgresStore: the store contract on PostgreSQL, for many processes on many machines.

``from swarmstate.backends.postgres import PostgresStore`` is the public
import; the modules of this package are how it works, each named for its part.
"""

from swarmstate.backends.postgres.store import PostgresStore

__all__ = ["PostgresStore"]
