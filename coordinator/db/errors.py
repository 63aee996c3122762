"""Which database errors mean "unavailable, try again later" rather than a bug.

The API answers these with 503 ``database_unavailable`` and ``Retry-After``; the round
driver counts them as an outage (see :mod:`coordinator.rounds.driver`): the server is
unreachable or went away, a pooled connection could not be had within the pool timeout,
a statement exceeded the statement timeout, or SQLite's write lock stayed busy.
"""

from __future__ import annotations

from sqlalchemy import exc

__all__ = ["is_database_unavailable"]


def is_database_unavailable(err: BaseException) -> bool:
    """Is ``err`` an outage or overload of the database (retrying later can succeed)?"""
    if isinstance(err, exc.TimeoutError):  # pool checkout timed out
        return True
    if isinstance(err, exc.DBAPIError):
        if err.connection_invalidated:
            return True
        return isinstance(err, exc.OperationalError | exc.InterfaceError)
    return False
