"""Initial schema: federations, participants, enrollment tokens, rounds, round events,
share envelopes (ciphertext only), coded results, cluster prompts and the privacy ledger.

Revision ID: 0001
Revises:
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = '0001'
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table('federations',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('name', sa.String(length=200), nullable=False),
    sa.Column('config', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_federations'))
    )
    op.create_table('cluster_prompts',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('federation_id', sa.String(length=36), nullable=False),
    sa.Column('generation', sa.Integer(), nullable=False),
    sa.Column('cluster_id', sa.Integer(), nullable=False),
    sa.Column('members', sa.JSON(), nullable=False),
    sa.Column('prompt', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['federation_id'], ['federations.id'], name=op.f('fk_cluster_prompts_federation_id_federations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_cluster_prompts')),
    sa.UniqueConstraint('federation_id', 'generation', 'cluster_id', name=op.f('uq_cluster_prompts_federation_id_generation_cluster_id'))
    )
    op.create_index(op.f('ix_cluster_prompts_federation_id'), 'cluster_prompts', ['federation_id'], unique=False)
    op.create_table('participants',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('federation_id', sa.String(length=36), nullable=False),
    sa.Column('lcc_index', sa.Integer(), nullable=False),
    sa.Column('display_name', sa.String(length=200), nullable=False),
    sa.Column('public_key', sa.LargeBinary(), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('enrolled_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['federation_id'], ['federations.id'], name=op.f('fk_participants_federation_id_federations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_participants')),
    sa.UniqueConstraint('federation_id', 'lcc_index', name=op.f('uq_participants_federation_id_lcc_index')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_participants_token_hash'))
    )
    op.create_index(op.f('ix_participants_federation_id'), 'participants', ['federation_id'], unique=False)
    op.create_table('privacy_ledger',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('federation_id', sa.String(length=36), nullable=False),
    sa.Column('round_number', sa.Integer(), nullable=False),
    sa.Column('cluster_id', sa.Integer(), nullable=False),
    sa.Column('mechanism', sa.String(length=32), nullable=False),
    sa.Column('sigma', sa.Float(), nullable=False),
    sa.Column('record', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['federation_id'], ['federations.id'], name=op.f('fk_privacy_ledger_federation_id_federations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_privacy_ledger'))
    )
    op.create_index(op.f('ix_privacy_ledger_federation_id'), 'privacy_ledger', ['federation_id'], unique=False)
    op.create_table('rounds',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('federation_id', sa.String(length=36), nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('stage', sa.String(length=20), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('stage_started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('deadline', sa.DateTime(timezone=True), nullable=True),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('failure_reason', sa.Text(), nullable=True),
    sa.Column('state', sa.JSON(), nullable=False),
    sa.ForeignKeyConstraint(['federation_id'], ['federations.id'], name=op.f('fk_rounds_federation_id_federations')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_rounds')),
    sa.UniqueConstraint('federation_id', 'number', name=op.f('uq_rounds_federation_id_number'))
    )
    op.create_index(op.f('ix_rounds_federation_id'), 'rounds', ['federation_id'], unique=False)
    op.create_index(op.f('ix_rounds_stage'), 'rounds', ['stage'], unique=False)
    op.create_table('coded_results',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('round_id', sa.String(length=36), nullable=False),
    sa.Column('stage', sa.String(length=20), nullable=False),
    sa.Column('participant', sa.Integer(), nullable=False),
    sa.Column('payload', sa.LargeBinary(), nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.id'], name=op.f('fk_coded_results_round_id_rounds')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_coded_results')),
    sa.UniqueConstraint('round_id', 'stage', 'participant', name=op.f('uq_coded_results_round_id_stage_participant'))
    )
    op.create_index(op.f('ix_coded_results_round_id'), 'coded_results', ['round_id'], unique=False)
    op.create_table('enrollment_tokens',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('federation_id', sa.String(length=36), nullable=False),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('used_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('participant_id', sa.String(length=36), nullable=True),
    sa.ForeignKeyConstraint(['federation_id'], ['federations.id'], name=op.f('fk_enrollment_tokens_federation_id_federations')),
    sa.ForeignKeyConstraint(['participant_id'], ['participants.id'], name=op.f('fk_enrollment_tokens_participant_id_participants')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_enrollment_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_enrollment_tokens_token_hash'))
    )
    op.create_index(op.f('ix_enrollment_tokens_federation_id'), 'enrollment_tokens', ['federation_id'], unique=False)
    op.create_table('round_events',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('round_id', sa.String(length=36), nullable=False),
    sa.Column('version', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('from_stage', sa.String(length=20), nullable=True),
    sa.Column('to_stage', sa.String(length=20), nullable=True),
    sa.Column('detail', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.id'], name=op.f('fk_round_events_round_id_rounds')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_round_events')),
    sa.UniqueConstraint('round_id', 'version', name=op.f('uq_round_events_round_id_version'))
    )
    op.create_index(op.f('ix_round_events_round_id'), 'round_events', ['round_id'], unique=False)
    op.create_table('share_envelopes',
    sa.Column('id', sa.Integer(), autoincrement=True, nullable=False),
    sa.Column('round_id', sa.String(length=36), nullable=False),
    sa.Column('sender', sa.Integer(), nullable=False),
    sa.Column('recipient', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('ciphertext', sa.LargeBinary(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.ForeignKeyConstraint(['round_id'], ['rounds.id'], name=op.f('fk_share_envelopes_round_id_rounds')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_share_envelopes')),
    sa.UniqueConstraint('round_id', 'sender', 'recipient', 'kind', name=op.f('uq_share_envelopes_round_id_sender_recipient_kind'))
    )
    op.create_index('ix_share_envelopes_round_recipient', 'share_envelopes', ['round_id', 'recipient'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_share_envelopes_round_recipient', table_name='share_envelopes')
    op.drop_table('share_envelopes')
    op.drop_index(op.f('ix_round_events_round_id'), table_name='round_events')
    op.drop_table('round_events')
    op.drop_index(op.f('ix_enrollment_tokens_federation_id'), table_name='enrollment_tokens')
    op.drop_table('enrollment_tokens')
    op.drop_index(op.f('ix_coded_results_round_id'), table_name='coded_results')
    op.drop_table('coded_results')
    op.drop_index(op.f('ix_rounds_stage'), table_name='rounds')
    op.drop_index(op.f('ix_rounds_federation_id'), table_name='rounds')
    op.drop_table('rounds')
    op.drop_index(op.f('ix_privacy_ledger_federation_id'), table_name='privacy_ledger')
    op.drop_table('privacy_ledger')
    op.drop_index(op.f('ix_participants_federation_id'), table_name='participants')
    op.drop_table('participants')
    op.drop_index(op.f('ix_cluster_prompts_federation_id'), table_name='cluster_prompts')
    op.drop_table('cluster_prompts')
    op.drop_table('federations')
