"""Alembic driven from code: upgrade, downgrade, and "is the schema at head?"."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, Engine

import migrations

__all__ = ["alembic_config", "current_revision", "downgrade", "head_revision", "upgrade"]

MIGRATIONS_DIR = Path(migrations.__file__).resolve().parent


def alembic_config(url: str | None = None, connection: Connection | None = None) -> Config:
    """An Alembic config for ``migrations/`` bound to ``url`` or a live ``connection``."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    if url is not None:
        config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    if connection is not None:
        config.attributes["connection"] = connection
    return config


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database of ``engine`` up to ``revision``."""
    with engine.begin() as conn:
        command.upgrade(alembic_config(connection=conn), revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Migrate the database of ``engine`` down to ``revision``."""
    with engine.begin() as conn:
        command.downgrade(alembic_config(connection=conn), revision)


def head_revision() -> str | None:
    return ScriptDirectory.from_config(alembic_config()).get_current_head()


def current_revision(connection: Connection) -> str | None:
    return MigrationContext.configure(connection).get_current_revision()
