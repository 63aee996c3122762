"""Participants' contributions to committee beacons: commitments uploaded two rounds
ahead, values revealed one round ahead (crypto.beacon_mix).

Only a table is created, so SQLite needs no table rebuild.

Revision ID: 0007_beacon_contributions
Revises: 0006
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('beacon_contributions',
    sa.Column('federation_id', sa.String(length=36), nullable=False),
    sa.Column('round_number', sa.Integer(), nullable=False),
    sa.Column('participant_index', sa.Integer(), nullable=False),
    sa.Column('commitment', sa.LargeBinary(), nullable=False),
    sa.Column('value', sa.LargeBinary(), nullable=True),
    sa.Column('reason', sa.String(length=40), nullable=True),
    sa.Column('committed_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revealed_at', sa.DateTime(timezone=True), nullable=True),
    sa.ForeignKeyConstraint(['federation_id'], ['federations.id'], name=op.f('fk_beacon_contributions_federation_id_federations')),
    sa.PrimaryKeyConstraint('federation_id', 'round_number', 'participant_index', name=op.f('pk_beacon_contributions'))
    )


def downgrade() -> None:
    op.drop_table('beacon_contributions')
