"""No fsync inside the test processes (the suite's session fixture ``_no_fsync_here``).

Durability against a crash is a property of real processes, and the tests that check it
kill real processes (``SIGKILL`` of daemons, coordinators and workers), whose own
interpreters keep every fsync. In-process an fsync only waits for the disk: it was about
40 % of an in-process committee round's wall time (2,536 calls, 13.6 s of a 60 s test).
PostgreSQL's test databases commit with ``synchronous_commit = off``
(:class:`tests.support.databases.PostgresDatabases`).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
from collections.abc import Iterator
from typing import Any


def _no_fsync(fd: int) -> None:
    """Stands in for ``os.fsync``."""


def _sqlite_without_sync(dbapi_connection: Any, _record: Any) -> None:
    if isinstance(dbapi_connection, sqlite3.Connection):
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA synchronous=OFF")
        cursor.close()


@contextlib.contextmanager
def no_fsync_in_this_process() -> Iterator[None]:
    """``os.fsync`` is a no-op and every SQLite connection SQLAlchemy opens in this process
    uses ``synchronous=OFF``, until the block ends."""
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    real = os.fsync
    os.fsync = _no_fsync
    event.listen(Engine, "connect", _sqlite_without_sync)
    try:
        yield
    finally:
        event.remove(Engine, "connect", _sqlite_without_sync)
        os.fsync = real
