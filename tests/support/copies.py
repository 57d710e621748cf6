"""One check shared by the file and the server backends: a copy of a store's data."""

from __future__ import annotations

import pytest

import swarmstate


def check_a_copy_refuses_the_originals_later_snapshots(
    original: swarmstate.BaseStore, copy: swarmstate.BaseStore, shared: swarmstate.Snapshot
) -> None:
    """``copy`` holds ``original``'s data as of ``shared`` (the value "shared" under ns/k).

    After the copy both take a snapshot with the same id: each refuses the
    other's, while ``shared``, history both hold, restores on the copy.
    """
    original.set("ns", "k", "on the original")
    on_original = original.snapshot()
    copy.set("ns", "k", "on the copy")
    on_copy = copy.snapshot()
    assert on_copy.id == on_original.id
    assert on_copy != on_original
    for refused in (
        lambda: copy.restore(on_original),
        lambda: on_copy.diff(on_original),
        lambda: on_original.diff(on_copy),
    ):
        with pytest.raises(swarmstate.SnapshotError, match="another store"):
            refused()
    assert copy.get("ns", "k") == "on the copy"
    copy.restore(shared)
    assert copy.get("ns", "k") == "shared"
    assert on_original.get("ns", "k") == "on the original"
