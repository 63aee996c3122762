"""Alembic environment: the URL comes from the caller's config or from the settings.

``secfpp.coordinator.db.migrate`` passes either a live connection (``config.attributes
["connection"]``) or a URL (``sqlalchemy.url``); with neither, the URL is
``get_settings().database_url``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from secfpp.coordinator.db.engine import make_engine
from secfpp.coordinator.db.models import Base
from secfpp.coordinator.settings import get_settings

config = context.config
target_metadata = Base.metadata


def _run(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    url = config.get_main_option("sqlalchemy.url") or get_settings().database_url
    context.configure(url=url, target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _run(connection)
        return
    url = config.get_main_option("sqlalchemy.url") or get_settings().database_url
    engine = make_engine(url)
    try:
        with engine.connect() as conn:
            _run(conn)
    finally:
        engine.dispose()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
