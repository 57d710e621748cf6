"""A pytest plugin that runs a throwaway PostgreSQL cluster for the test session.

Registered from ``tests/conftest.py`` with ``pytest_plugins = ["tests.support.pgserver"]``.

Also :func:`create_schema_at_version`, for tests of migrations.

Fixtures:
    pg_conninfo: (session) a libpq conninfo string for a fresh cluster that
        listens only on a Unix socket inside its own temporary directory.
    pg_store_factory: (function) ``make(**kwargs) -> PostgresStore`` on a
        fresh schema per call; schemas are dropped and stores closed at
        teardown.

Without PostgreSQL server binaries the fixtures skip with one reason, unless
``SWARMSTATE_REQUIRE_POSTGRES=1`` is set (CI), in which case they fail.
"""

from __future__ import annotations

import glob
import os
import secrets
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

MISSING_REASON = "PostgreSQL server binaries not found: install the postgresql package"


def find_bindir() -> Path | None:
    """The directory holding initdb/pg_ctl/postgres, or None."""
    override = os.environ.get("SWARMSTATE_PG_BINDIR")
    candidates: list[str] = [override] if override else []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            out = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, check=True
            ).stdout.strip()
            candidates.append(out)
        except (OSError, subprocess.CalledProcessError):
            pass
    # Debian/Ubuntu keep server binaries out of PATH; newest major version first.
    candidates += sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True
    )
    for candidate in candidates:
        path = Path(candidate)
        if all((path / tool).is_file() for tool in ("initdb", "pg_ctl", "postgres")):
            return path
    return None


class Cluster:
    """A PostgreSQL cluster in a temporary directory, reachable on a Unix socket only."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.root = Path(tempfile.mkdtemp(prefix="ss-pg-"))
        self.data = self.root / "data"
        self.log = self.root / "server.log"
        # initdb and postgres refuse to run as root: run them as the postgres user.
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            runuser = shutil.which("runuser")
            if runuser is None:
                raise RuntimeError("running as root needs runuser to start PostgreSQL")
            self._as_user = [runuser, "-u", "postgres", "--"]
            shutil.chown(self.root, "postgres", "postgres")
        self.root.chmod(0o700)
        self.user = "postgres" if self._as_user else _current_user()

    def _run(self, *args: str) -> None:
        result = subprocess.run(
            [*self._as_user, *args], capture_output=True, text=True, check=False
        )
        if result.returncode != 0:
            log = self.log.read_text() if self.log.exists() else ""
            raise RuntimeError(
                f"{Path(args[0]).name} failed ({result.returncode}):\n"
                f"{result.stdout}\n{result.stderr}\n{log}"
            )

    def start(self) -> str:
        self._run(
            str(self.bindir / "initdb"),
            "-D", str(self.data),
            "-U", self.user,
            "-A", "trust",
            "-E", "UTF8",
            "--locale=C",
            "--no-sync",
        )  # fmt: skip
        # fsync/full_page_writes off: a throwaway test cluster never needs crash
        # safety, and it keeps start-up and every commit fast on a shared machine.
        options = " ".join(
            [
                "-c listen_addresses=''",
                f"-c unix_socket_directories='{self.root}'",
                "-c fsync=off",
                "-c full_page_writes=off",
                "-c max_connections=200",
                "-c shared_buffers=64MB",
            ]
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D", str(self.data),
            "-l", str(self.log),
            "-o", options,
            "-w",
            "-t", "60",
            "start",
        )  # fmt: skip
        return f"host={self.root} port=5432 user={self.user} dbname=postgres"

    def stop(self) -> None:
        try:
            if (self.data / "postmaster.pid").exists():
                self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", "immediate",
                          "-w", "stop")  # fmt: skip
        finally:
            shutil.rmtree(self.root, ignore_errors=True)


def create_schema_at_version(conninfo: str, schema: str, version: int) -> None:
    """Create ``schema`` as swarmstate's setup() left it at ``version`` (an older release)."""
    import psycopg
    from psycopg import sql

    from swarmstate.backends.postgres import statements as _pg_sql
    from tests.support.pg_releases import RELEASED

    if not 1 <= version <= len(RELEASED):
        raise ValueError(f"no released schema version {version} (1 to {len(RELEASED)})")
    ident = sql.Identifier(schema)
    with psycopg.connect(conninfo, autocommit=True) as conn, conn.transaction():
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(ident))
        conn.execute(sql.SQL(_pg_sql.SCHEMA_VERSION_TABLE).format(schema=ident))
        for number, step in enumerate(RELEASED[:version], 1):
            for statement in step:
                conn.execute(sql.SQL(statement).format(schema=ident))
            conn.execute(sql.SQL(_pg_sql.RECORD_VERSION).format(schema=ident), (number,))


def _current_user() -> str:
    import getpass

    return getpass.getuser()


@pytest.fixture(scope="session")
def pg_conninfo() -> Iterator[str]:
    """Conninfo of a throwaway PostgreSQL cluster shared by the whole session."""
    preset = os.environ.get("SWARMSTATE_PG_CONNINFO")
    if preset:
        yield preset
        return
    bindir = find_bindir()
    if bindir is None:
        if os.environ.get("SWARMSTATE_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"{MISSING_REASON} (SWARMSTATE_REQUIRE_POSTGRES=1)", pytrace=False)
        pytest.skip(MISSING_REASON)
    cluster = Cluster(bindir)
    try:
        conninfo = cluster.start()
    except BaseException:
        cluster.stop()
        raise
    try:
        yield conninfo
    finally:
        cluster.stop()


class PgStoreFactory:
    """Builds set-up PostgresStores, each on a fresh schema; cleans them all up."""

    def __init__(self, conninfo: str) -> None:
        self.conninfo = conninfo
        self.stores: list[Any] = []
        self.schemas: set[str] = set()

    def __call__(self, **kwargs: Any) -> Any:
        """A set-up store on a fresh schema (or on ``schema=``, to share one)."""
        from swarmstate.backends.postgres import PostgresStore

        kwargs.setdefault("schema", f"t_{secrets.token_hex(8)}")
        if "pool" not in kwargs:
            kwargs.setdefault("conninfo", self.conninfo)
        store = PostgresStore(**kwargs)
        self.stores.append(store)
        self.schemas.add(kwargs["schema"])
        store.setup()
        return store

    def reopen(self, store: Any, **kwargs: Any) -> Any:
        """Close ``store`` and open a new handle on the same schema."""
        store.close()
        return self(schema=store.schema, **kwargs)

    def cleanup(self) -> None:
        import psycopg
        from psycopg import sql

        for store in self.stores:
            store.close()
        if not self.schemas:
            return
        with psycopg.connect(self.conninfo, autocommit=True) as conn:
            for schema in self.schemas:
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )


@pytest.fixture
def pg_store_factory(pg_conninfo: str) -> Iterator[PgStoreFactory]:
    """``make(**kwargs)`` builds a set-up PostgresStore on a fresh schema.

    ``kwargs`` go to :class:`PostgresStore`; ``make.reopen(store)`` closes a
    store and opens its schema again. Schemas are dropped at teardown.
    """
    factory = PgStoreFactory(pg_conninfo)
    yield factory
    factory.cleanup()
