"""SwarmStateSaver: a LangGraph checkpointer over any swarmstate store.

Drop-in for ``InMemorySaver``, ``SqliteSaver`` and ``AsyncSqliteSaver``::

    from swarmstate.backends.disk import DiskStore
    from swarmstate.integrations.langgraph import SwarmStateSaver

    graph = builder.compile(checkpointer=SwarmStateSaver(DiskStore("state.db")))

The package, by role: the adapter LangGraph calls (:mod:`.saver`, its async
half :mod:`.aio`, thread operations :mod:`.operations`); the write path
(:mod:`.values`: what changed and its stored form, over :mod:`.sharing`,
the byte-level sharing of versions); the read path (:mod:`.reads`,
:mod:`.history`); the stored format (:mod:`.keys`, :mod:`.entry`); and what
runs beside them (:mod:`.guard`: tombstones and fencing; :mod:`.threads`:
delete, copy, collection; :mod:`.retention`).
"""

from swarmstate.integrations.langgraph.operations import ThreadActivity
from swarmstate.integrations.langgraph.saver import (
    Retention,
    RetentionReport,
    SwarmStateSaver,
    strict_serializer,
)

__all__ = ["Retention", "RetentionReport", "SwarmStateSaver", "ThreadActivity", "strict_serializer"]
