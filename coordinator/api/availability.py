"""Database outages at the API: 503 with ``Retry-After``, and the readiness probe.

A request that fails because the database is unreachable, the pool had no connection
within ``db_pool_timeout_s``, or a statement ran past ``db_statement_timeout_s`` gets
``503 database_unavailable`` with ``Retry-After: retry_after_s`` (participant daemons
wait and retry), never a 500; the round driver is told, so that stage deadlines get
their grace period once the database answers again.

The readiness probe (``/readyz``) runs on its own unpooled engine with 1 s timeouts in
a worker thread that the route stops waiting for after :data:`READY_TIMEOUT_S`, so it
answers within 2 s whatever the database does. On SQLite it also checks the disk the
database file lives on (:func:`disk_problem`): a full disk makes every write fail with
503 while reads and ``SELECT 1`` still work, so without this check ``/readyz`` said 200
while no upload could be stored.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from sqlalchemy import Engine, exc, text

from secfpp.coordinator.api.problems import problem_response
from secfpp.coordinator.db.engine import DatabaseLimits
from secfpp.coordinator.db.errors import is_database_unavailable
from secfpp.coordinator.db.migrate import current_revision, head_revision
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.settings import Settings

__all__ = [
    "READY_TIMEOUT_S",
    "Readiness",
    "check_readiness",
    "database_limits",
    "disk_problem",
    "install_outage_handlers",
]

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 1.8
"""How long ``/readyz`` waits for the database probe before it reports it down."""


def database_limits(settings: Settings) -> DatabaseLimits:
    """The pool and timeout settings as the engine takes them."""
    return DatabaseLimits(
        pool_size=settings.db_pool_size,
        max_overflow=settings.db_max_overflow,
        pool_timeout_s=settings.db_pool_timeout_s,
        connect_timeout_s=settings.db_connect_timeout_s,
        statement_timeout_s=settings.db_statement_timeout_s,
    )


def unavailable(settings: Settings, err: BaseException) -> ProblemError:
    return ProblemError(
        "database_unavailable",
        f"the database is unreachable or too slow ({type(err).__name__}); retry later",
        headers={"Retry-After": str(settings.retry_after_s)},
    )


def install_outage_handlers(app: FastAPI) -> None:
    """Database errors that retrying can fix become 503 ``database_unavailable``."""

    async def _database_error(request: Request, err: Exception) -> JSONResponse:
        if not is_database_unavailable(err):
            log.error("database error on %s", request.url.path, exc_info=err)
            return problem_response(ProblemError("internal_error", type(err).__name__))
        driver = getattr(request.app.state, "driver", None)
        if driver is not None:
            driver.note_outage()
        log.warning("%s %s: database unavailable (%s)", request.method, request.url.path, err)
        return problem_response(unavailable(request.app.state.settings, err), request.url.path)

    app.add_exception_handler(exc.DBAPIError, _database_error)
    app.add_exception_handler(exc.TimeoutError, _database_error)


@dataclass(frozen=True)
class Readiness:
    """What the probe found: ``database`` is ``up`` or ``down``; ``disk`` is None when
    the database's disk can take writes (or is not checked), else what is wrong."""

    database: str
    revision: str | None = None
    error: str | None = None
    disk: str | None = None


WRITE_PROBE_BYTES = 4096
"""Size of the file the disk check writes, fsyncs and deletes next to the database."""

_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG})


def disk_problem(directory: Path, min_free_bytes: int) -> str | None:
    """Why the filesystem of ``directory`` cannot take the database's writes, or None.

    Two checks: the space left to unprivileged writers (``statvfs``: ``f_bavail *
    f_frsize``) is at least ``min_free_bytes`` (0: not checked), and a real write of
    :data:`WRITE_PROBE_BYTES` bytes to a new file there, fsynced, succeeds (the file is
    deleted). A write that fails for another reason than a full or read-only disk
    (permissions, a vanished directory) is reported too: SQLite could not write either.
    """
    if min_free_bytes > 0:
        stat = os.statvfs(directory)
        free = stat.f_bavail * stat.f_frsize
        if free < min_free_bytes:
            return (
                f"{free} bytes free on the filesystem of {directory}, below the "
                f"{min_free_bytes} that ready_min_free_mib asks for"
            )
    probe = directory / f".secfpp-write-probe-{secrets.token_hex(8)}"
    try:
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, bytes(WRITE_PROBE_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as err:
        kind = "full" if err.errno in _DISK_FULL else "not writable"
        return f"the disk of {directory} is {kind}: writing a probe file failed ({err.strerror})"
    finally:
        probe.unlink(missing_ok=True)
    return None


def _sqlite_directory(engine: Engine) -> Path | None:
    """Folder of a file-backed SQLite database (None for PostgreSQL or in memory)."""
    database = engine.url.database
    if engine.dialect.name != "sqlite" or not database or database == ":memory:":
        return None
    return Path(database).resolve().parent


def _probe(engine: Engine, min_free_bytes: int) -> Readiness:
    try:
        with engine.connect() as conn:
            conn.execute(text("SELECT 1"))
            revision = current_revision(conn)
    except Exception as err:  # any failure means "not ready"; the reason is reported
        return Readiness("down", error=type(err).__name__)
    directory = _sqlite_directory(engine)
    disk = None if directory is None else disk_problem(directory, min_free_bytes)
    return Readiness("up", revision=revision, disk=disk)


async def check_readiness(
    engine: Engine, limiter: anyio.CapacityLimiter, min_free_bytes: int = 0
) -> Readiness:
    """Probe the database (and a SQLite database's disk) in a worker thread; ``down`` if
    it takes over READY_TIMEOUT_S."""
    with anyio.move_on_after(READY_TIMEOUT_S):
        return await anyio.to_thread.run_sync(
            _probe, engine, min_free_bytes, abandon_on_cancel=True, limiter=limiter
        )
    return Readiness("down", error=f"no answer within {READY_TIMEOUT_S} s")


def readiness_document(found: Readiness, settings: Settings) -> dict[str, Any]:
    """The ``/readyz`` answer; raises the 503 problem when not ready."""
    if found.database != "up":
        raise ProblemError(
            "not_ready",
            f"database unreachable: {found.error}",
            headers={"Retry-After": str(settings.retry_after_s)},
            database="down",
        )
    if found.disk is not None:
        raise ProblemError(
            "not_ready",
            f"database disk: {found.disk}",
            headers={"Retry-After": str(settings.retry_after_s)},
            database="up",
            disk="full",
        )
    head = head_revision()
    if found.revision != head:
        raise ProblemError(
            "not_ready",
            f"schema at revision {found.revision}, head is {head}",
            database="up",
            revision=found.revision,
        )
    return {"status": "ready", "database": "up", "revision": found.revision}
