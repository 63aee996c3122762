"""Dashboard: login sessions and one-time login links (digests only), and the round
starts the privacy ledger refused.

Only tables are created, so SQLite needs no table rebuild.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0004'
down_revision: str | None = '0003'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('ledger_refusals',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('federation_id', sa.String(length=36), nullable=False),
    sa.Column('round_number', sa.Integer(), nullable=False),
    sa.Column('reason', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['federation_id'], ['federations.id'], name=op.f('fk_ledger_refusals_federation_id_federations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_ledger_refusals'))
    )
    op.create_index(op.f('ix_ledger_refusals_federation_id'), 'ledger_refusals', ['federation_id'], unique=False)
    op.create_table('dashboard_sessions',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('secret_hash', sa.String(length=64), nullable=False),
    sa.Column('admin_name', sa.String(length=64), nullable=False),
    sa.Column('credential_hash', sa.String(length=64), nullable=False),
    sa.Column('csrf_token', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('used_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_dashboard_sessions')),
    sa.UniqueConstraint('secret_hash', name=op.f('uq_dashboard_sessions_secret_hash'))
    )


def downgrade() -> None:
    op.drop_table('dashboard_sessions')
    op.drop_index(op.f('ix_ledger_refusals_federation_id'), table_name='ledger_refusals')
    op.drop_table('ledger_refusals')
