"""Federation lifecycle: ``status`` (active, paused, finished, aborted), its reason and
when the federation ended.

Columns with a server default only, so SQLite adds them without rebuilding the table;
every existing federation becomes ``active``.

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "federations",
        sa.Column("status", sa.String(length=16), server_default="active", nullable=False),
    )
    op.add_column("federations", sa.Column("status_reason", sa.Text(), nullable=True))
    op.add_column("federations", sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("federations") as batch:
        batch.drop_column("ended_at")
        batch.drop_column("status_reason")
        batch.drop_column("status")
