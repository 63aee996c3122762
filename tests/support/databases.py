"""This session's PostgreSQL databases on the test server.

PostgreSQL runs on 127.0.0.1:5432 (trust auth, user postgres; ``SECFPP_TEST_PG_*`` change
it). Every test session creates its own databases (``secfpp_test_<random>_...``) and drops
them at the end; a migrated database is a copy of a migrated template, or one a finished test
gave back and :meth:`PostgresDatabases.recycle` emptied (``CREATE DATABASE`` copies the
server's catalogs and costs 0.07-0.4 s on the 2-core machine, emptying one about 0.03 s).
"""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass
from typing import Any

PG_HOST = os.environ.get("SECFPP_TEST_PG_HOST", "127.0.0.1")
PG_PORT = int(os.environ.get("SECFPP_TEST_PG_PORT", "5432"))
PG_USER = os.environ.get("SECFPP_TEST_PG_USER", "postgres")


def pg_url(database: str) -> str:
    return f"postgresql+psycopg://{PG_USER}@{PG_HOST}:{PG_PORT}/{database}"


def admin_execute(sql: str) -> None:
    """Run ``sql`` on the server's ``postgres`` database (autocommit)."""
    with connect("postgres") as conn:
        conn.execute(sql)


class PostgresDatabases:
    """Creates and drops this session's databases on the test server."""

    def __init__(self) -> None:
        self.prefix = f"secfpp_test_{secrets.token_hex(4)}"
        self._count = 0
        self._created: list[str] = []
        self._template: str | None = None
        self._tables: frozenset[str] = frozenset()
        self._revision: str | None = None
        self._order: tuple[str, ...] = ()  # tables to empty, children first; () = never
        self._sequences: tuple[str, ...] = ()
        self._clean: list[str] = []  # migrated databases emptied by recycle(), ready again

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
        if name in self._clean:
            self._clean.remove(name)
        admin_execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if name in self._created:
            self._created.remove(name)

    def migrated(self) -> str:
        """A fresh database at the migration head: one :meth:`recycle` emptied, or a copy of
        a migrated template."""
        if self._template is None:
            from secfpp.coordinator.db.engine import make_engine
            from secfpp.coordinator.db.migrate import upgrade

            template = self.create()
            engine = make_engine(pg_url(template))
            upgrade(engine)
            engine.dispose()
            self._template = template
            with connect(template) as conn:
                self._tables, self._revision = _schema(conn)
                self._order = _emptying_order(conn, self._tables)
                self._sequences = _sequences(conn)
        if self._clean:
            return self._clean.pop()
        return self.create(template=self._template)

    def contents(self, name: str) -> Contents:
        """The rows of every table of ``name`` (a database from :meth:`migrated`) and the
        states of its sequences, for :meth:`restore`."""
        if not self._order:
            raise RuntimeError("the migrated template's tables cannot be ordered")
        tables = []
        with connect(name) as conn:
            for table in reversed(self._order):  # parents first
                with conn.cursor().copy(f"COPY {_quoted(table)} TO STDOUT (FORMAT BINARY)") as out:
                    tables.append((table, b"".join(bytes(block) for block in out)))
            sequences = []
            for sequence in self._sequences:
                row = conn.execute(
                    f"SELECT last_value, is_called FROM {_quoted(sequence)}"
                ).fetchone()
                sequences.append((sequence, int(row[0]), bool(row[1])))
        return Contents(tuple(tables), tuple(sequences))

    def restore(self, name: str, contents: Contents) -> None:
        """Fill ``name``, a database :meth:`migrated` just gave out (empty), with ``contents``
        (in one transaction): a copy of the database they were read from, for about 0.03 s
        where ``CREATE DATABASE ... TEMPLATE`` costs the server 0.4 s of CPU.

        Triggers stay off while the rows go in (``session_replication_role = replica``): the
        rows are already what the triggers made, and procrastinate's insert trigger on
        ``procrastinate_jobs`` would otherwise add a second ``deferred`` event per job, whose
        id then collides with the copied event's."""
        with connect(name) as conn, conn.transaction():
            conn.execute("SET LOCAL search_path TO public, procrastinate")
            conn.execute("SET LOCAL session_replication_role = replica")
            for table, data in contents.tables:
                with conn.cursor().copy(
                    f"COPY {_quoted(table)} FROM STDIN (FORMAT BINARY)"
                ) as into:
                    into.write(data)
            for sequence, value, called in contents.sequences:
                conn.execute("SELECT setval(%s, %s, %s)", (sequence, value, called))

    def recycle(self, name: str) -> None:
        """Give back a database from :meth:`migrated` once its test is done: emptied to the
        template's state (every other session on it ended, every row of every table but
        ``alembic_version`` deleted, children before parents, every sequence restarted, in
        one transaction) for the next :meth:`migrated`; dropped instead when that cannot be
        proven (its tables or revision differ from the template's, a session would not end,
        the template's tables were not empty, anything failed)."""
        try:
            with connect(name) as conn:
                same = _schema(conn) == (self._tables, self._revision)
                if self._order and same and _end_other_sessions(conn, name):
                    with conn.transaction():
                        # procrastinate's triggers name its tables unqualified
                        conn.execute("SET LOCAL search_path TO public, procrastinate")
                        for table in self._order:
                            conn.execute(f"DELETE FROM {_quoted(table)}")  # type: ignore[arg-type]
                        for sequence in self._sequences:
                            conn.execute(f"ALTER SEQUENCE {_quoted(sequence)} RESTART")  # type: ignore[arg-type]
                    self._clean.append(name)
                    return
        except Exception:  # any doubt: drop it instead
            pass
        self.drop(name)

    def drop_all(self) -> None:
        for name in list(self._created):
            self.drop(name)


@dataclass(frozen=True)
class Contents:
    """What :meth:`PostgresDatabases.contents` read: each table's rows (binary ``COPY``,
    parents before children) and each sequence's ``(last_value, is_called)``."""

    tables: tuple[tuple[str, bytes], ...]
    sequences: tuple[tuple[str, int, bool], ...]


def connect(database: str) -> Any:
    """An autocommit psycopg connection to ``database`` on the test server."""
    import psycopg

    return psycopg.connect(
        host=PG_HOST, port=PG_PORT, user=PG_USER, dbname=database, autocommit=True,
        connect_timeout=3,
    )  # fmt: skip


def _qualified(name: str, schema: str) -> str:
    """``name``, prefixed with its schema unless that is ``public``."""
    return name if schema == "public" else f"{schema}.{name}"


def _quoted(table: str) -> str:
    """``schema.table`` or ``table`` as a quoted SQL name."""
    return ".".join(f'"{part}"' for part in table.split("."))


def _schema(conn: Any) -> tuple[frozenset[str], str | None]:
    """The public tables other than ``alembic_version``, and the migration revision."""
    rows = conn.execute(
        "SELECT table_schema, table_name FROM information_schema.tables "
        "WHERE table_schema NOT IN ('pg_catalog', 'information_schema')"
    ).fetchall()
    tables = frozenset(_qualified(t, schema) for schema, t in rows) - {"alembic_version"}
    revision = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    return tables, (revision[0][0] if len(revision) == 1 else None)


def _emptying_order(conn: Any, tables: frozenset[str]) -> tuple[str, ...]:
    """``tables`` ordered so that every table comes before those its foreign keys point to
    (deleting in this order never violates a key); () when the template holds a row (a
    database emptied would then differ from a copy) or the keys form a cycle."""
    for table in tables:
        if conn.execute(f"SELECT EXISTS (SELECT 1 FROM {_quoted(table)})").fetchone()[0]:
            return ()
    rows = conn.execute(
        "SELECT child.relname, cn.nspname, parent.relname, pn.nspname FROM pg_constraint c "
        "JOIN pg_class child ON child.oid = c.conrelid "
        "JOIN pg_namespace cn ON cn.oid = child.relnamespace "
        "JOIN pg_class parent ON parent.oid = c.confrelid "
        "JOIN pg_namespace pn ON pn.oid = parent.relnamespace WHERE c.contype = 'f'"
    ).fetchall()

    parents: dict[str, set[str]] = {t: set() for t in tables}
    for child, child_schema, parent, parent_schema in rows:
        a, b = _qualified(child, child_schema), _qualified(parent, parent_schema)
        if a in parents and b in parents and a != b:
            parents[a].add(b)
    order: list[str] = []
    left = set(tables)
    while left:  # a table goes once no remaining table refers to it
        ready = sorted(t for t in left if not any(t in parents[o] for o in left if o != t))
        if not ready:
            return ()
        order += ready
        left -= set(ready)
    return tuple(order)


def _sequences(conn: Any) -> tuple[str, ...]:
    rows = conn.execute(
        "SELECT schemaname, sequencename FROM pg_sequences "
        "WHERE schemaname NOT IN ('pg_catalog', 'information_schema')"
    ).fetchall()
    return tuple(sorted(_qualified(name, schema) for schema, name in rows))


def _end_other_sessions(conn: Any, name: str, wait_s: float = 2.0) -> bool:
    """Terminates every other session on ``name``; whether none is left within ``wait_s``."""
    import time

    query = "FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
    conn.execute(f"SELECT pg_terminate_backend(pid) {query}", (name,))
    deadline = time.monotonic() + wait_s
    while conn.execute(f"SELECT count(*) {query}", (name,)).fetchone()[0]:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True
