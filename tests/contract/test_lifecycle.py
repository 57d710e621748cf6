"""What every backend does around its calls: building without uuid4, closing while in use."""

from __future__ import annotations

import threading
import uuid
from typing import Any

import pytest

import swarmstate as ss


def test_building_and_reopening_a_store_never_calls_uuid4(
    store_factory: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Test suites patch uuid.uuid4 to get deterministic ids (LangGraph's does):
    # a store must not take one of them.
    calls: list[None] = []
    real = uuid.uuid4

    def counting() -> uuid.UUID:
        calls.append(None)
        return real()

    monkeypatch.setattr(uuid, "uuid4", counting)
    store = store_factory()
    store.set("ns", "k", 1)
    assert store.snapshot().get("ns", "k") == 1
    if store_factory.durable:
        store = store_factory.reopen(store)
        store.restore(store.snapshots()[-1])
    assert calls == []


def test_close_twice_is_harmless_and_later_calls_on_any_thread_are_refused(
    durable_store_factory: Any,
) -> None:
    store = durable_store_factory()
    store.set("ns", "k", 1)
    store.close()
    store.close()
    seen: list[BaseException] = []

    def call() -> None:
        try:
            store.get("ns", "k")
        except BaseException as exc:  # checked by the main thread
            seen.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    thread.join()
    assert len(seen) == 1
    assert isinstance(seen[0], ss.StoreClosedError)
    with pytest.raises(ss.StoreClosedError):
        store.set("ns", "k", 2)
