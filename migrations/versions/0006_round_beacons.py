"""Committee beacons drawn ahead: round r's beacon exists (and its commitment is
published) before round r starts.

Only a table is created, so SQLite needs no table rebuild.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-26
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0006'
down_revision: str | None = '0005'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('round_beacons',
    sa.Column('federation_id', sa.String(length=36), nullable=False),
    sa.Column('round_number', sa.Integer(), nullable=False),
    sa.Column('value', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['federation_id'], ['federations.id'], name=op.f('fk_round_beacons_federation_id_federations')),
    sa.PrimaryKeyConstraint('federation_id', 'round_number', name=op.f('pk_round_beacons'))
    )


def downgrade() -> None:
    op.drop_table('round_beacons')
