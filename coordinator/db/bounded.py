"""A client-side bound on every PostgreSQL answer, so that a hung database cannot hang a request.

``statement_timeout`` is enforced by the server: a database that accepts connections and
then never answers (a stalled disk, a frozen VM, a network path that drops replies but
not the connection) never cancels anything, and TCP keepalives and ``tcp_user_timeout``
see a healthy peer. A request then waited for the whole stall (the pool's pre-ping
``SELECT 1`` blocked first). :class:`BoundedConnection` is a psycopg connection whose
every wait for the server (``execute``, ``commit``, ``rollback``, the pre-ping) gives up
after ``answer_timeout_s``: it closes the connection (its protocol state is unknown) and
raises :class:`psycopg.OperationalError`, which SQLAlchemy sees as a disconnect
(``connection.closed``) and the API answers with 503 ``database_unavailable`` and
``Retry-After``.

:func:`bound_answers` installs it on an engine with two bounds:

* idle in the pool and while being checked out (the pre-ping, the first-connect queries
  of a new connection): ``connect_timeout_s``, a ping has no work to do;
* checked out (the request's statements, its commit or rollback):
  ``statement_timeout_s + ANSWER_SLACK_S``, so that a slow statement on a live server is
  still cancelled by the server first (and reported as such).

A request on a hung database therefore gets its 503 within ``connect_timeout_s`` (ping)
+ ``connect_timeout_s`` (reconnect) when it starts during the stall, and within
``statement_timeout_s + ANSWER_SLACK_S`` when the stall begins under a running statement.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import psycopg
from psycopg import errors as pg_errors
from psycopg.rows import TupleRow
from sqlalchemy import Engine, event

__all__ = ["ANSWER_SLACK_S", "BoundedConnection", "bound_answers"]

ANSWER_SLACK_S = 1.0
"""How much longer than ``statement_timeout`` the client waits for the server's answer."""

_WAIT_TIMEOUT: type[BaseException] = getattr(pg_errors, "_WaitTimeout", TimeoutError)
"""psycopg's exception of a wait that ran past its timeout (psycopg >= 3.2)."""


class BoundedConnection(psycopg.Connection[TupleRow]):
    """A psycopg connection whose waits for the server end after ``answer_timeout_s``
    (None: no bound); then the connection is closed and OperationalError raised."""

    answer_timeout_s: float | None = None

    def wait(
        self, gen: Generator[Any, Any, Any], interval: float = 0.1, timeout: float | None = None
    ) -> Any:
        bound = self.answer_timeout_s
        if timeout is not None or bound is None:
            return super().wait(gen, interval, timeout)
        try:
            return super().wait(gen, interval, bound)
        except _WAIT_TIMEOUT:
            self.pgconn.finish()  # mid-protocol: the connection cannot be used again
            raise psycopg.OperationalError(
                f"the database sent no answer within {bound:g} s; connection closed"
            ) from None


def bound_answers(engine: Engine, *, connect_timeout_s: float, statement_timeout_s: float) -> None:
    """Make ``engine`` (PostgreSQL through psycopg) open :class:`BoundedConnection` s with
    the two bounds of the module docstring; other drivers are left alone."""
    if engine.dialect.driver != "psycopg":
        return
    idle = float(connect_timeout_s)
    busy = float(statement_timeout_s) + ANSWER_SLACK_S

    @event.listens_for(engine, "do_connect")
    def _connect(_dialect: Any, _record: Any, cargs: Any, cparams: Any) -> BoundedConnection:
        connection = BoundedConnection.connect(*cargs, **cparams)
        connection.answer_timeout_s = idle
        return connection

    @event.listens_for(engine, "checkout")
    def _checkout(dbapi_connection: Any, _record: Any, _proxy: Any) -> None:
        if isinstance(dbapi_connection, BoundedConnection):
            dbapi_connection.answer_timeout_s = busy

    @event.listens_for(engine, "checkin")
    def _checkin(dbapi_connection: Any, _record: Any) -> None:
        if isinstance(dbapi_connection, BoundedConnection):
            dbapi_connection.answer_timeout_s = idle
