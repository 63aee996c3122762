"""Alembic driven from code: upgrade, downgrade, and "is the schema at head?".

Migrations are serialized across processes, so that several coordinators started with
``--migrate`` at once do not race: on PostgreSQL under a transaction-scoped advisory
lock (the others wait, then find the schema at head and do nothing), on SQLite under an
exclusive ``flock`` on ``<database file>.migrate-lock`` next to the database.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
from collections.abc import Iterator
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine, text

from secfpp import migrations

__all__ = [
    "MIGRATION_LOCK_KEY",
    "alembic_config",
    "current_revision",
    "downgrade",
    "head_revision",
    "upgrade",
]

log = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(migrations.__file__).resolve().parent
MIGRATION_LOCK_KEY = 0x5EC_F99_013
"""Key of the PostgreSQL advisory lock held while migrating (any fixed bigint)."""


def alembic_config(url: str | None = None, connection: Connection | None = None) -> Config:
    """An Alembic config for ``migrations/`` bound to ``url`` or a live ``connection``."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def _sqlite_file(engine: Engine) -> Path | None:
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    return Path(database)


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive advisory lock on ``path`` (created if missing), released on exit."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log.info("another process is migrating %s; waiting for it", path.parent)
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def _locked(conn: Connection) -> None:
    """Take the cross-process migration lock inside the transaction of ``conn``."""
    if conn.dialect.name == "postgresql":
        # The wait for the lock must not count against the statement timeout, and a long
        # migration must not be cancelled by it: both are local to this transaction.
        conn.execute(text("SET LOCAL statement_timeout = 0"))
        conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY})


def _migrate(engine: Engine, revision: str, *, down: bool) -> None:
    sqlite_file = _sqlite_file(engine)
    lock = (
        _file_lock(sqlite_file.with_name(sqlite_file.name + ".migrate-lock"))
        if sqlite_file is not None
        else contextlib.nullcontext()
    )
    with lock, engine.begin() as conn:
        _locked(conn)
        config = alembic_config(connection=conn)
        if down:
            command.downgrade(config, revision)
        else:
            command.upgrade(config, revision)


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database of ``engine`` up to ``revision`` (serialized, module docstring)."""
    _migrate(engine, revision, down=False)


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Migrate the database of ``engine`` down to ``revision`` (serialized)."""
    _migrate(engine, revision, down=True)


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()
