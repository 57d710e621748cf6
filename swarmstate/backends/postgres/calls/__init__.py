"""What each PostgresStore call runs: reads, writes, snapshots, reclaim.

Reads and writes are plans (:mod:`swarmstate.backends.postgres.plans`), run
by the session's blocking runner or the async one; snapshots and reclaim run
through the blocking session only. Each module is used by the store alone.
"""
