"""Job queue: procrastinate's schema in its own PostgreSQL schema ``procrastinate``.

Decodes and deadline checks run as procrastinate jobs on PostgreSQL
(coordinator/jobs). Its tables, types and functions go into the schema
``procrastinate`` (every job-system connection sets ``search_path=procrastinate``), so
the coordinator's own schema is unchanged. The SQL is procrastinate's
``SchemaManager.get_schema()`` of the pinned version (pyproject.toml); moving to a
procrastinate release with schema changes needs a new revision that runs its
migration files (``procrastinate.schema.SchemaManager.get_migrations_path()``) with the
same search_path. SQLite (the embedded default) runs jobs in-process: nothing to do.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0005'
down_revision: str | None = '0004'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

SCHEMA = 'procrastinate'


def upgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != 'postgresql':
        return
    from procrastinate.schema import SchemaManager

    previous = bind.execute(sa.text('SHOW search_path')).scalar()
    bind.execute(sa.text(f'CREATE SCHEMA {SCHEMA}'))
    bind.execute(sa.text(f'SET LOCAL search_path TO {SCHEMA}'))
    # Several statements, dollar-quoted bodies and literal % signs: sent as one simple
    # query on the raw psycopg connection (no parameter parsing).
    bind.connection.driver_connection.execute(SchemaManager.get_schema())  # type: ignore[union-attr]
    bind.execute(sa.text("SELECT set_config('search_path', :path, true)"), {'path': previous})


def downgrade() -> None:
    bind = op.get_bind()
    if bind.dialect.name != 'postgresql':
        return
    bind.execute(sa.text(f'DROP SCHEMA IF EXISTS {SCHEMA} CASCADE'))
