"""Shared fixtures: one ``store_factory`` runs the contract tests on every backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import swarmstate

pytest_plugins = ["tests.support.pgserver"]  # the throwaway PostgreSQL cluster

BACKENDS = ["memory", "disk", "postgres"]


class StoreFactory:
    """Makes fresh stores of one backend, and reopens durable ones."""

    def __init__(self, backend: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
        self.backend = backend
        self.durable = backend != "memory"
        self._tmp_path = tmp_path
        self._request = request
        self._opened: list[swarmstate.BaseStore] = []
        self._count = 0
        self._pg: Callable[..., Any] | None = None

    def __call__(self, **kwargs: Any) -> swarmstate.BaseStore:
        self._count += 1
        if self.backend == "memory":
            store: swarmstate.BaseStore = swarmstate.Store(**kwargs)
        elif self.backend == "disk":
            from swarmstate.backends.disk import DiskStore

            store = DiskStore(self._tmp_path / f"store{self._count}.db", **kwargs)
        else:
            if self._pg is None:
                self._pg = self._request.getfixturevalue("pg_store_factory")
            store = self._pg(**kwargs)
        self._opened.append(store)
        return store

    def reopen(self, store: swarmstate.BaseStore, **kwargs: Any) -> swarmstate.BaseStore:
        """Close ``store`` and open its data again (durable backends only)."""
        store.close()
        if self.backend == "disk":
            from swarmstate.backends.disk import DiskStore

            assert isinstance(store, DiskStore)
            again: swarmstate.BaseStore = DiskStore(store.path, **kwargs)
        elif self.backend == "postgres":
            assert self._pg is not None
            again = self._pg.reopen(store, **kwargs)  # type: ignore[attr-defined]
        else:
            raise AssertionError("the in-memory store cannot be reopened")
        self._opened.append(again)
        return again

    def close_all(self) -> None:
        for store in self._opened:
            store.close()


@pytest.fixture(params=BACKENDS)
def store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of fresh stores, parametrized over every backend."""
    factory = StoreFactory(request.param, tmp_path, request)
    yield factory
    factory.close_all()


@pytest.fixture(params=[b for b in BACKENDS if b != "memory"])
def durable_store_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """A factory of fresh stores on each backend that outlives its process."""
    factory = StoreFactory(request.param, tmp_path, request)
    yield factory
    factory.close_all()


@pytest.fixture
def store(store_factory: StoreFactory) -> swarmstate.BaseStore:
    """A fresh, empty store of each backend."""
    return store_factory()
