"""A PostgreSQL password never appears in an exception or on the command line's output.

Connection strings that cannot be parsed, reach no server, or name a database
that does not exist, each holding a password, through every entry point that
takes one: the secret is in no exception's text or repr, in none of the
exceptions chained to it, and in neither stdout nor stderr of the command line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import psycopg
import pytest

import swarmstate
from swarmstate.backends.postgres import PostgresStore
from swarmstate.integrations.langgraph import SwarmStateSaver
from tests.support.cli import run_cli

pytestmark = pytest.mark.postgres

SECRET = "SECRETPW"


def bad_conninfos(pg_conninfo: str) -> dict[str, str]:
    """Connection strings holding :data:`SECRET` that fail, each for another reason."""
    params = psycopg.conninfo.conninfo_to_dict(pg_conninfo)
    socket, port = params["host"], params.get("port", 5432)
    return {
        "unparsable URL": f"postgresql://u:{SECRET}@[::1/x",
        "unparsable parameter": f"postgresql://u:{SECRET}@127.0.0.1:1/x?bogus=1",
        "bad port": f"postgresql://u:{SECRET}@127.0.0.1:notaport/x",
        "unreachable": f"postgresql://u:{SECRET}@127.0.0.1:1/x",
        "unreachable key=value": f"host=127.0.0.1 port=1 password={SECRET} dbname=x",
        "unterminated quote": f"host=127.0.0.1 password='{SECRET}",
        "no such database": (
            f"postgresql://{params.get('user', 'postgres')}:{SECRET}@/no_such_db"
            f"?host={socket}&port={port}"
        ),
    }


def chain(exc: BaseException) -> Iterator[BaseException]:
    """``exc`` and every exception chained to it (cause or context)."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        found = todo.pop()
        if found is None or id(found) in seen:
            continue
        seen.add(id(found))
        yield found
        todo += [found.__cause__, found.__context__]


def assert_hidden(call: Callable[[], Any]) -> BaseException:
    with pytest.raises(swarmstate.SwarmStateError) as info:
        call()
    for exc in chain(info.value):
        assert SECRET not in str(exc)
        assert SECRET not in repr(exc)
        assert all(SECRET not in str(arg) for arg in exc.args)
    return info.value


@pytest.fixture(params=range(7), ids=lambda i: str(i))
def bad(request: pytest.FixtureRequest, pg_conninfo: str) -> str:
    return list(bad_conninfos(pg_conninfo).values())[request.param]


def test_postgres_store_never_shows_the_password(bad: str) -> None:
    assert_hidden(lambda: PostgresStore(bad))


def test_saver_given_a_dsn_never_repeats_the_password_in_its_hint(bad: str) -> None:
    exc = assert_hidden(lambda: SwarmStateSaver(bad))  # type: ignore[arg-type]
    assert "from_conn_string" in str(exc)


def test_from_conn_string_never_shows_the_password(bad: str) -> None:
    assert_hidden(lambda: SwarmStateSaver.from_conn_string(bad))


@pytest.mark.parametrize("command", [["threads"], ["check"], ["inspect"], ["history", "t"]])
def test_the_command_line_never_prints_the_password(bad: str, command: list[str]) -> None:
    done = run_cli(command[0], bad, *command[1:], timeout=60)
    assert done.returncode != 0
    assert done.stderr.strip()
    assert SECRET not in done.stdout + done.stderr


def test_hide_password_finds_it_in_every_form() -> None:
    from swarmstate._checks import hide_password

    for conninfo in [
        f"postgresql://u:{SECRET}@h/x",
        "postgresql://u:SEC%52ETPW@h/x",  # percent-encoded R
        f"postgres://u:{SECRET}@h:5432,h2:5433/x",
        f"postgresql://h/x?password={SECRET}&sslmode=disable",
        f"host=h password={SECRET}",
        f"host=h password = '{SECRET}' dbname=x",
        f"host=h PASSWORD='{SECRET}",
    ]:
        quoted = f"{conninfo} | {conninfo.replace('%52', 'R')}"
        assert SECRET not in hide_password(quoted, conninfo), conninfo
    assert hide_password("host=h dbname=x", "host=h dbname=x") == "host=h dbname=x"


@pytest.mark.parametrize("command", ["inspect", "check", "prune"])
def test_the_command_line_never_prints_the_password_of_a_store_it_reads(
    pg_conninfo: str, pg_store_factory: Any, command: str
) -> None:
    # The test server trusts every local connection, so the password is ignored.
    store = pg_store_factory()
    store.set("ns", "k", 1)
    params = psycopg.conninfo.conninfo_to_dict(pg_conninfo)
    url = (
        f"postgresql://{params.get('user', 'postgres')}:{SECRET}@/{params['dbname']}"
        f"?host={params['host']}&port={params.get('port', 5432)}"
    )
    extra = ["--keep-last", "1", "--dry-run"] if command == "prune" else []
    done = run_cli(command, url, "--schema", store.schema, *extra, timeout=60)
    assert done.stdout.strip(), done.stderr
    assert SECRET not in done.stdout + done.stderr
