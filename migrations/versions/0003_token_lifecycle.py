"""Token lifecycle: revocation and rotation of participant tokens, revocation of
enrollment tokens, named admin tokens (hashes only), one public key per participant of
a federation.

Only columns are added and an index created, so SQLite needs no table rebuild (a rebuild
of ``participants`` would trip the foreign keys of ``enrollment_tokens``). The upgrade
stops with a clear message if a federation already has two participants with the same
public key (the new unique index could not be built).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0003'
down_revision: str | None = '0002'
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    duplicates = op.get_bind().execute(
        sa.text(
            'SELECT federation_id, COUNT(*) FROM participants '
            'GROUP BY federation_id, public_key HAVING COUNT(*) > 1'
        )
    ).all()
    if duplicates:
        federations = ', '.join(sorted({str(row[0]) for row in duplicates}))
        raise RuntimeError(
            'participants share a public key within federation(s) '
            f'{federations}; remove the duplicates before migrating to 0003'
        )
    op.create_table('admin_tokens',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=64), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('last_used_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_admin_tokens')),
    sa.UniqueConstraint('name', name=op.f('uq_admin_tokens_name')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_admin_tokens_token_hash'))
    )
    with op.batch_alter_table('participants', recreate='never') as batch_op:
        batch_op.add_column(sa.Column('token_rotated_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('token_last_used_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True))
        batch_op.create_index('ix_participants_federation_public_key', ['federation_id', 'public_key'], unique=True)
    with op.batch_alter_table('enrollment_tokens', recreate='never') as batch_op:
        batch_op.add_column(sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    # SQLite >= 3.35 drops columns natively; no rebuild of the referenced participants table.
    with op.batch_alter_table('enrollment_tokens', recreate='never') as batch_op:
        batch_op.drop_column('revoked_at')
    with op.batch_alter_table('participants', recreate='never') as batch_op:
        batch_op.drop_index('ix_participants_federation_public_key')
        batch_op.drop_column('revoked_at')
        batch_op.drop_column('token_last_used_at')
        batch_op.drop_column('token_rotated_at')
    op.drop_table('admin_tokens')
