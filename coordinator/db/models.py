"""SQLAlchemy models of the coordinator's state (the schema the migrations create).

Ownership of the data:

* ``federations`` hold the resolved config (JSON,
  :class:`secfpp.federation.FederationConfig`);
* ``participants`` their fixed LCC index, X25519 public key (unique in the federation)
  and the SHA-256 of their API token (never the token), when it was last rotated and
  last used, and ``revoked_at`` once revoked (the row and its history stay);
  ``enrollment_tokens`` likewise only hashes, with ``used_at`` or ``revoked_at``;
* ``admin_tokens`` named admin credentials created through the API, as hashes (the
  settings' ``admin_token`` is not stored);
* ``rounds`` one row per round: ``stage`` and ``version`` are the compare-and-set pair
  every transition and every accepted upload updates; ``state`` the round's protocol
  state (membership trained under, who shared, reference sets, decoded outcome);
* ``round_events`` the append-only log, one row per transition/refusal/abort, unique per
  ``(round_id, version)`` so two workers can never both log a step from one version;
* ``share_envelopes`` sealed shares as opaque ciphertext, ``coded_results`` the packed
  result vectors participants computed on shares;
* ``cluster_prompts`` the global prompt of every cluster per generation (generation ``g``
  is what round ``g + 1`` trains from; generation 0 is drawn from the public seed);
* ``privacy_ledger`` one row per noised release;
* ``participant_metrics`` numbers a participant reported about a round (e.g. held-out
  accuracy of the published prompt), one row per ``(round_id, participant, name)``;
  never data, never a prompt.
* ``beacon_contributions`` participants' committed (and later revealed) contributions
  to a committee round's beacon;
* ``attestations`` a participant's MAC on the digest of a coded stage's request, one row
  per ``(round_id, stage, sender, recipient)``: opaque to the coordinator (only the
  recipient holds the pair key), relayed so that participants agree on the request
  before anyone answers (crypto.attestation);
* ``ledger_refusals`` one row per round start the privacy ledger refused (the round was
  never created; the row says which number it would have had and why);
* ``dashboard_sessions`` the dashboard's login sessions and one-time login links, as
  SHA-256 digests of the cookie / link secret, with the digest of the admin credential
  that opened them (a revoked credential ends its sessions).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

__all__ = [
    "AdminToken",
    "Attestation",
    "Base",
    "ClusterPrompt",
    "CodedResult",
    "DashboardSession",
    "EnrollmentToken",
    "Federation",
    "LedgerRefusal",
    "Participant",
    "ParticipantMetric",
    "PrivacyLedgerEntry",
    "Round",
    "RoundEvent",
    "ShareEnvelope",
    "UTCDateTime",
]

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class UTCDateTime(TypeDecorator[datetime]):
    """Timezone-aware UTC datetimes on every backend (SQLite drops the offset)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError("naive datetime given to a UTC column")
        value = value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {  # noqa: RUF012 - SQLAlchemy's declarative hook
        datetime: UTCDateTime(),
        dict[str, Any]: JSON(),
        list[Any]: JSON(),
        bytes: LargeBinary(),
    }


class Federation(Base):
    __tablename__ = "federations"

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    name: Mapped[str] = mapped_column(String(200))
    config: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]
    status: Mapped[str] = mapped_column(String(16), default="active", server_default="active")
    """``active``, ``paused`` (no round starts), ``finished`` or ``aborted`` (terminal)."""
    status_reason: Mapped[str | None] = mapped_column(Text)
    """Why it paused or ended, e.g. ``finished: rounds done``."""
    ended_at: Mapped[datetime | None]


class Participant(Base):
    __tablename__ = "participants"
    __table_args__ = (
        UniqueConstraint("federation_id", "lcc_index"),
        # An index, not a constraint: SQLite adds it without rebuilding the table.
        Index("ix_participants_federation_public_key", "federation_id", "public_key", unique=True),
    )

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    federation_id: Mapped[str] = mapped_column(ForeignKey("federations.id"), index=True)
    lcc_index: Mapped[int] = mapped_column(Integer)
    display_name: Mapped[str] = mapped_column(String(200))
    public_key: Mapped[bytes]
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    enrolled_at: Mapped[datetime]
    token_rotated_at: Mapped[datetime | None]
    """When the current API token replaced the previous one (None: the enrollment token)."""
    token_last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


class EnrollmentToken(Base):
    __tablename__ = "enrollment_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    federation_id: Mapped[str] = mapped_column(ForeignKey("federations.id"), index=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    used_at: Mapped[datetime | None]
    participant_id: Mapped[str | None] = mapped_column(ForeignKey("participants.id"))
    revoked_at: Mapped[datetime | None]


class AdminToken(Base):
    __tablename__ = "admin_tokens"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    created_at: Mapped[datetime]
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]


class Round(Base):
    __tablename__ = "rounds"
    __table_args__ = (UniqueConstraint("federation_id", "number"),)

    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    federation_id: Mapped[str] = mapped_column(ForeignKey("federations.id"), index=True)
    number: Mapped[int] = mapped_column(Integer)
    stage: Mapped[str] = mapped_column(String(20), index=True)
    version: Mapped[int] = mapped_column(Integer)
    stage_started_at: Mapped[datetime]
    deadline: Mapped[datetime | None]
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]
    failure_reason: Mapped[str | None] = mapped_column(Text)
    state: Mapped[dict[str, Any]]


class RoundEvent(Base):
    __tablename__ = "round_events"
    __table_args__ = (UniqueConstraint("round_id", "version"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    round_id: Mapped[str] = mapped_column(ForeignKey("rounds.id"), index=True)
    version: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    from_stage: Mapped[str | None] = mapped_column(String(20))
    to_stage: Mapped[str | None] = mapped_column(String(20))
    detail: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]


class ShareEnvelope(Base):
    __tablename__ = "share_envelopes"
    __table_args__ = (
        UniqueConstraint("round_id", "sender", "recipient", "kind"),
        Index("ix_share_envelopes_round_recipient", "round_id", "recipient"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    round_id: Mapped[str] = mapped_column(ForeignKey("rounds.id"))
    sender: Mapped[int] = mapped_column(Integer)
    recipient: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))
    ciphertext: Mapped[bytes]
    created_at: Mapped[datetime]


class CodedResult(Base):
    __tablename__ = "coded_results"
    __table_args__ = (UniqueConstraint("round_id", "stage", "participant"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    round_id: Mapped[str] = mapped_column(ForeignKey("rounds.id"), index=True)
    stage: Mapped[str] = mapped_column(String(20))
    participant: Mapped[int] = mapped_column(Integer)
    payload: Mapped[bytes]
    digest: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]


class Attestation(Base):
    """Participant ``sender``'s attestation of the request digest it was shown for
    ``stage`` of a round, addressed to ``recipient`` (crypto.attestation): ``mac`` is
    HMAC-SHA256 under a key only the two participants derive. The first digest a sender
    attests per round and stage is kept; another is refused (``conflicting_upload``)."""

    __tablename__ = "attestations"
    __table_args__ = (
        Index("ix_attestations_round_id_recipient", "round_id", "stage", "recipient"),
    )

    round_id: Mapped[str] = mapped_column(ForeignKey("rounds.id"), primary_key=True)
    stage: Mapped[str] = mapped_column(String(20), primary_key=True)
    sender: Mapped[int] = mapped_column(Integer, primary_key=True)
    recipient: Mapped[int] = mapped_column(Integer, primary_key=True)
    digest: Mapped[str] = mapped_column(String(64))
    mac: Mapped[bytes]
    created_at: Mapped[datetime]


class ClusterPrompt(Base):
    __tablename__ = "cluster_prompts"
    __table_args__ = (UniqueConstraint("federation_id", "generation", "cluster_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    federation_id: Mapped[str] = mapped_column(ForeignKey("federations.id"), index=True)
    generation: Mapped[int] = mapped_column(Integer)
    cluster_id: Mapped[int] = mapped_column(Integer)
    members: Mapped[list[Any]]
    prompt: Mapped[bytes]
    created_at: Mapped[datetime]


class PrivacyLedgerEntry(Base):
    __tablename__ = "privacy_ledger"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    federation_id: Mapped[str] = mapped_column(ForeignKey("federations.id"), index=True)
    round_number: Mapped[int] = mapped_column(Integer)
    cluster_id: Mapped[int] = mapped_column(Integer)
    mechanism: Mapped[str] = mapped_column(String(32))
    sigma: Mapped[float] = mapped_column(Float)
    record: Mapped[dict[str, Any]]
    created_at: Mapped[datetime]


class ParticipantMetric(Base):
    __tablename__ = "participant_metrics"
    __table_args__ = (UniqueConstraint("round_id", "participant", "name"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    round_id: Mapped[str] = mapped_column(ForeignKey("rounds.id"))
    participant: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(40))
    value: Mapped[float] = mapped_column(Float)
    created_at: Mapped[datetime]


class RoundBeacon(Base):
    """A committee round's beacon, drawn before the round starts (docs/protocol.md,
    section 11): the coordinator publishes only its commitment until the round starts."""

    __tablename__ = "round_beacons"

    federation_id: Mapped[str] = mapped_column(ForeignKey("federations.id"), primary_key=True)
    round_number: Mapped[int] = mapped_column(Integer, primary_key=True)
    value: Mapped[bytes]
    created_at: Mapped[datetime]


class BeaconContribution(Base):
    """A participant's contribution to round ``round_number``'s committee beacon
    (crypto.beacon_mix; docs/protocol.md section 11): its commitment, uploaded while round
    ``round_number - 2`` is the newest, and the value it revealed while round
    ``round_number - 1`` was (None until then, or when the reveal did not open the
    commitment: ``reason`` says which)."""

    __tablename__ = "beacon_contributions"

    federation_id: Mapped[str] = mapped_column(ForeignKey("federations.id"), primary_key=True)
    round_number: Mapped[int] = mapped_column(Integer, primary_key=True)
    participant_index: Mapped[int] = mapped_column(Integer, primary_key=True)
    commitment: Mapped[bytes]
    value: Mapped[bytes | None]
    reason: Mapped[str | None] = mapped_column(String(40))
    committed_at: Mapped[datetime]
    revealed_at: Mapped[datetime | None]


class LedgerRefusal(Base):
    __tablename__ = "ledger_refusals"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    federation_id: Mapped[str] = mapped_column(ForeignKey("federations.id"), index=True)
    round_number: Mapped[int] = mapped_column(Integer)
    reason: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime]


class DashboardSession(Base):
    __tablename__ = "dashboard_sessions"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))
    """``session`` (a login cookie) or ``link`` (a one-time login link)."""
    secret_hash: Mapped[str] = mapped_column(String(64), unique=True)
    admin_name: Mapped[str] = mapped_column(String(64))
    credential_hash: Mapped[str] = mapped_column(String(64))
    csrf_token: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime]
    expires_at: Mapped[datetime]
    used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
