"""Attestations: participants' MACs on a coded stage's request digest, relayed so that
they agree on the request before anyone answers (crypto.attestation; docs/protocol.md
section 7, "Equivocation").

Only a table is created, so SQLite needs no table rebuild.

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-27
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "attestations",
        sa.Column("round_id", sa.String(length=36), nullable=False),
        sa.Column("stage", sa.String(length=20), nullable=False),
        sa.Column("sender", sa.Integer(), nullable=False),
        sa.Column("recipient", sa.Integer(), nullable=False),
        sa.Column("digest", sa.String(length=64), nullable=False),
        sa.Column("mac", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["round_id"], ["rounds.id"], name=op.f("fk_attestations_round_id_rounds")
        ),
        sa.PrimaryKeyConstraint(
            "round_id", "stage", "sender", "recipient", name=op.f("pk_attestations")
        ),
    )
    op.create_index(
        "ix_attestations_round_id_recipient",
        "attestations",
        ["round_id", "stage", "recipient"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index("ix_attestations_round_id_recipient", table_name="attestations")
    op.drop_table("attestations")
