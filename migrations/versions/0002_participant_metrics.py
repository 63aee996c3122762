"""Participant metrics: numbers a participant reports about a round (name -> value).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0002'
down_revision: str | None = '0001'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('participant_metrics',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('round_id', sa.String(length=36), nullable=False),
    sa.Column('participant', sa.Integer(), nullable=False),
    sa.Column('name', sa.String(length=40), nullable=False),
    sa.Column('value', sa.Float(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.id'], name=op.f('fk_participant_metrics_round_id_rounds')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_participant_metrics')),
    sa.UniqueConstraint('round_id', 'participant', 'name', name=op.f('uq_participant_metrics_round_id_participant_name'))
    )


def downgrade() -> None:
    op.drop_table('participant_metrics')
