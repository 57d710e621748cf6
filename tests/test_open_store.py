"""One rule for what a target names, for the saver and the ``swarmstate`` command alike.

``swarmstate.backends.open_store`` maps ``":memory:"``, a file path or a
PostgreSQL connection string to a store; ``SwarmStateSaver.from_conn_string``
and the command line both go through it, so no target opens one backend for
one of them and another backend for the other.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import swarmstate
from swarmstate import backends
from swarmstate._cli import source
from swarmstate.backends.disk import DiskStore
from swarmstate.backends.postgres import PostgresStore
from swarmstate.integrations.langgraph import SwarmStateSaver


def test_each_kind_of_target_opens_its_backend(tmp_path: Path, pg_conninfo: str) -> None:
    opened = [
        backends.open_store(":memory:"),
        backends.open_store(str(tmp_path / "state.db")),
        backends.open_store(pg_conninfo, schema="open_store_kinds"),
    ]
    try:
        assert [type(store) for store in opened] == [swarmstate.Store, DiskStore, PostgresStore]
    finally:
        for store in opened:
            store.close()


def test_a_file_whose_name_holds_an_equals_sign_is_that_file_for_the_saver_and_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    name = "run=1.db"  # libpq key=value text, were there no such file
    with DiskStore(name) as store:
        store.set("ns", "k", 1)
    with SwarmStateSaver.from_conn_string(name) as saver:
        assert isinstance(saver.store, DiskStore)
        assert saver.store.get("ns", "k") == 1
    with source.open_store(name) as store:
        assert store.get("ns", "k") == 1
    assert not backends.is_postgres(name)
    assert backends.is_postgres("host=db dbname=app")  # no such file: PostgreSQL
    assert backends.is_postgres("postgresql://db/app")


@pytest.mark.parametrize("target", ["", None, 3])
def test_a_target_that_is_not_a_non_empty_str_is_refused(target: object) -> None:
    with pytest.raises(swarmstate.InvalidArgumentError, match="non-empty str"):
        backends.open_store(target)  # type: ignore[arg-type]
