"""Engine and session factory, created by the app's lifespan (never at import time).

Every engine carries explicit limits (:class:`DatabaseLimits`): a bounded pool whose
checkout gives up after ``pool_timeout_s``, and connect and statement timeouts, so an
unreachable or overloaded database turns into a prompt error (the API answers 503 with
``Retry-After``) instead of a request that hangs.

* PostgreSQL: libpq ``connect_timeout``, ``statement_timeout`` (server side, set per
  connection), TCP keepalives and ``tcp_user_timeout`` (a dead peer is noticed within
  about ``connect_timeout_s`` instead of the kernel's minutes), ``pool_pre_ping``, and
  a client-side bound on every answer (:mod:`coordinator.db.bounded`): a database that
  accepts connections but never answers gives an error, not a hang.
* SQLite: the busy timeout (``statement_timeout_s``: how long a statement waits for
  the write lock), WAL, foreign keys on.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker
from sqlalchemy.pool import NullPool

from secfpp.coordinator.db.bounded import bound_answers

__all__ = ["DatabaseLimits", "make_engine", "make_probe_engine", "make_sessionmaker"]


@dataclass(frozen=True)
class DatabaseLimits:
    """Pool size and timeouts of one engine (seconds; see the module docstring)."""

    pool_size: int = 10
    max_overflow: int = 30
    pool_timeout_s: float = 10.0
    connect_timeout_s: int = 5
    statement_timeout_s: float = 30.0

    def __post_init__(self) -> None:
        if self.pool_size < 1:
            raise ValueError(f"pool_size must be at least 1, not {self.pool_size}")
        if self.max_overflow < 0:
            raise ValueError(f"max_overflow must be at least 0, not {self.max_overflow}")
        for name in ("pool_timeout_s", "connect_timeout_s", "statement_timeout_s"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive, not {getattr(self, name)}")


def _postgres_connect_args(limits: DatabaseLimits) -> dict[str, Any]:
    timeout_ms = int(limits.statement_timeout_s * 1000)
    return {
        "connect_timeout": max(1, int(limits.connect_timeout_s)),
        "options": f"-c statement_timeout={timeout_ms}",
        "keepalives": 1,
        "keepalives_idle": 10,
        "keepalives_interval": 5,
        "keepalives_count": 3,
        "tcp_user_timeout": int(limits.connect_timeout_s * 1000),
    }


def _sqlite_engine(url: str, echo: bool, limits: DatabaseLimits, pooled: bool) -> Engine:
    memory = ":memory:" in url or url.rstrip("/") in ("sqlite:", "sqlite+pysqlite:")
    # In memory, SQLAlchemy picks a single-connection pool: no sizing, no pool class.
    kwargs: dict[str, Any] = {}
    if not memory and pooled:
        kwargs.update(
            pool_size=limits.pool_size,
            max_overflow=limits.max_overflow,
            pool_timeout=limits.pool_timeout_s,
        )
    elif not memory:
        kwargs["poolclass"] = NullPool
    engine = create_engine(
        url,
        echo=echo,
        connect_args={"check_same_thread": False, "timeout": limits.statement_timeout_s},
        **kwargs,
    )

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        if not memory:
            cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.close()

    return engine


def make_engine(url: str, *, echo: bool = False, limits: DatabaseLimits | None = None) -> Engine:
    """A pooled engine for ``url`` with ``limits`` (defaults: :class:`DatabaseLimits`)."""
    limits = limits or DatabaseLimits()
    if url.startswith("sqlite"):
        return _sqlite_engine(url, echo, limits, pooled=True)
    engine = create_engine(
        url,
        echo=echo,
        pool_pre_ping=True,
        pool_size=limits.pool_size,
        max_overflow=limits.max_overflow,
        pool_timeout=limits.pool_timeout_s,
        connect_args=_postgres_connect_args(limits),
    )
    _bound(engine, limits)
    return engine


def _bound(engine: Engine, limits: DatabaseLimits) -> None:
    bound_answers(
        engine,
        connect_timeout_s=limits.connect_timeout_s,
        statement_timeout_s=limits.statement_timeout_s,
    )


def make_probe_engine(url: str, *, timeout_s: float = 1.0) -> Engine:
    """An unpooled engine whose every timeout is ``timeout_s``: the readiness check.

    Unpooled, so a probe that the caller abandons (the database hangs) holds no pool
    slot; each probe opens one fresh connection and closes it.
    """
    limits = DatabaseLimits(
        pool_size=1,
        max_overflow=0,
        pool_timeout_s=timeout_s,
        connect_timeout_s=max(1, int(timeout_s)),
        statement_timeout_s=timeout_s,
    )
    if url.startswith("sqlite"):
        return _sqlite_engine(url, False, limits, pooled=False)
    engine = create_engine(url, poolclass=NullPool, connect_args=_postgres_connect_args(limits))
    _bound(engine, limits)
    return engine


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
