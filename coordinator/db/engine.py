"""Engine and session factory, created by the app's lifespan (never at import time)."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.orm import Session, sessionmaker

__all__ = ["make_engine", "make_sessionmaker"]


def make_engine(url: str, *, echo: bool = False) -> Engine:
    """An engine for ``url``; SQLite gets a busy timeout, WAL and foreign keys on."""
    if url.startswith("sqlite"):
        engine = create_engine(
            url, echo=echo, connect_args={"check_same_thread": False, "timeout": 30}
        )

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
            cursor = dbapi_connection.cursor()
            if ":memory:" not in url:
                cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.close()

        return engine
    return create_engine(url, echo=echo, pool_pre_ping=True)


def make_sessionmaker(engine: Engine) -> sessionmaker[Session]:
    return sessionmaker(engine, expire_on_commit=False)
