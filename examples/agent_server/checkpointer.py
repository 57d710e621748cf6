"""The checkpointer factory the Agent Server loads (``checkpointer.path`` in ``langgraph.json``).

The server enters the factory's context when it starts and leaves it when it
stops; ``afrom_conn_string`` opens the store (and, on PostgreSQL, its async
pool on the server's loop) and closes it on the way out.
``SWARMSTATE_CONN`` picks the store: a file path (the default,
``swarmstate.db`` in the server's working directory), or a PostgreSQL URL.

Run from this directory (docs/langgraph.md, *Agent Server*, says why the variables)::

    LANGGRAPH_CLI_NO_ANALYTICS=1 LANGGRAPH_NO_VERSION_CHECK=true langgraph dev --no-browser
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from swarmstate.integrations.langgraph import SwarmStateSaver


@asynccontextmanager
async def saver() -> AsyncIterator[SwarmStateSaver]:
    conn = os.environ.get("SWARMSTATE_CONN", "swarmstate.db")
    async with SwarmStateSaver.afrom_conn_string(conn) as checkpointer:
        await checkpointer.asetup()  # creates PostgreSQL tables once; else a no-op
        yield checkpointer
