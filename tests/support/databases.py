"""This session's PostgreSQL databases on the test server.

PostgreSQL runs on 127.0.0.1:5432 (trust auth, user postgres; ``SECFPP_TEST_PG_*`` change
it). Every test session creates its own databases (``secfpp_test_<random>_...``) and drops
them at the end; a migrated database is a copy of a migrated template.
"""

from __future__ import annotations

import os
import secrets

PG_HOST = os.environ.get("SECFPP_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("SECFPP_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("SECFPP_TEST_PG_USER", "postgres")


def pg_url(database: str) -> str:
    return f"postgresql+psycopg://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"


def admin_execute(sql: str) -> None:
    """Run ``sql`` on the server's ``postgres`` database (autocommit)."""
    import psycopg

    with psycopg.connect(
        host=PG_HOST,
        port=PG_PORT,
        user=PG_USER,
        dbname="postgres",
        autocommit=True,
        connect_timeout=3,
    ) as conn:
        conn.execute(sql)  # type: ignore[arg-type]


class PostgresDatabases:
    """Creates and drops this session's databases on the test server."""

    def __init__(self) -> None:
        self.prefix = f"secfpp_test_{secrets.token_hex(4)}"
        self._count = 0
        self._created: list[str] = []
        self._template: str | None = None

    def create(self, *, template: str | None = None) -> str:
        self._count += 1
        name = f"{self.prefix}_{self._count}"
        suffix = f" TEMPLATE {template}" if template else ""
        admin_execute(f'CREATE DATABASE "{name}"{suffix}')
        # Commits need not wait for the server's WAL flush: nothing in the suite stops the
        # PostgreSQL server (coordinators are killed, connections cut, never the server), so
        # every committed row stays visible; about 3-5 ms saved per commit on this disk.
        admin_execute(f'ALTER DATABASE "{name}" SET synchronous_commit = off')
        self._created.append(name)
        return name

    def drop(self, name: str) -> None:
        admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self._created:
            self._created.remove(name)

    def migrated(self) -> str:
        """A fresh database at the migration head (copied from a migrated template)."""
        if self._template is None:
            from secfpp.coordinator.db.engine import make_engine
            from secfpp.coordinator.db.migrate import upgrade

            template = self.create()
            engine = make_engine(pg_url(template))
            upgrade(engine)
            engine.dispose()
            self._template = template
        return self.create(template=self._template)

    def drop_all(self) -> None:
        for name in list(self._created):
            self.drop(name)
