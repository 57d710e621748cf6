"""Fixtures for the LangGraph checkpointer tests: one saver per store backend.

This folder has no ``__init__.py`` on purpose: pytest puts ``tests/`` on
``sys.path`` for the test modules at its top, and a package named
``langgraph`` there would shadow the real LangGraph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import swarmstate
from swarmstate.integrations.langgraph import SwarmStateSaver

SAVER_BACKENDS = ["memory", "disk", "postgres"]

MakeStore = Callable[[], swarmstate.BaseStore]


@pytest.fixture(params=SAVER_BACKENDS)
def make_store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MakeStore]:
    """A factory of fresh, empty stores of one backend (closed at teardown)."""
    opened: list[swarmstate.BaseStore] = []
    counter = iter(range(1_000_000))

    def make() -> swarmstate.BaseStore:
        store: swarmstate.BaseStore
        if request.param == "memory":
            store = swarmstate.Store()
        elif request.param == "disk":
            from swarmstate.backends.disk import DiskStore

            store = DiskStore(tmp_path / f"lg{next(counter)}.db")
        else:
            pg: Any = request.getfixturevalue("pg_store_factory")
            store = pg()
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()


@pytest.fixture
def saver(make_store: MakeStore) -> SwarmStateSaver:
    """A SwarmStateSaver over a fresh store of each backend."""
    return SwarmStateSaver(make_store())
