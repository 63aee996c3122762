"""Federations, enrollment and participant tokens.

Tokens are random (256 bits, ``secrets``), shown once, and stored only as SHA-256
hex digests: enrollment tokens (``sfe_...``, one-time, expiring) and participant API
tokens (``sfp_...``). A participant's LCC index is fixed at enrollment: the lowest
free index of the federation, so indices are ``0..N-1`` in enrollment order.
"""

from __future__ import annotations

import hashlib
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from coordinator.config import FederationConfig, FederationCreate
from coordinator.db.models import EnrollmentToken, Federation, Participant
from coordinator.errors import ProblemError
from coordinator.rounds.store import rowcount
from crypto.errors import ParameterError
from crypto.transport import load_public_key

__all__ = [
    "Enrollment",
    "authenticate_participant",
    "create_federation",
    "enroll",
    "federation_config",
    "get_federation",
    "hash_token",
    "issue_enrollment_tokens",
]


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def create_federation(session: Session, request: FederationCreate, now: datetime) -> Federation:
    """Store a federation with its resolved config (crypto bounds checked here)."""
    try:
        config = request.resolve()
    except ParameterError as err:
        raise ProblemError("invalid_parameter", str(err), parameter=err.parameter) from None
    federation = Federation(
        id=str(uuid.uuid4()),
        name=request.name,
        config=config.model_dump(mode="json"),
        created_at=now,
    )
    session.add(federation)
    session.commit()
    return federation


def get_federation(session: Session, federation_id: str) -> Federation:
    federation = session.get(Federation, federation_id)
    if federation is None:
        raise ProblemError("federation_not_found", f"no federation with id {federation_id!r}")
    return federation


def federation_config(federation: Federation) -> FederationConfig:
    return FederationConfig.model_validate(federation.config)


def issue_enrollment_tokens(
    session: Session, federation: Federation, count: int, ttl_s: int, now: datetime
) -> tuple[list[str], datetime]:
    expires = now + timedelta(seconds=ttl_s)
    tokens = [f"sfe_{secrets.token_urlsafe(32)}" for _ in range(count)]
    for token in tokens:
        session.add(
            EnrollmentToken(
                federation_id=federation.id,
                token_hash=hash_token(token),
                created_at=now,
                expires_at=expires,
            )
        )
    session.commit()
    return tokens, expires


@dataclass(frozen=True)
class Enrollment:
    participant: Participant
    api_token: str


def enroll(
    session: Session, *, token: str, display_name: str, public_key: bytes, now: datetime
) -> Enrollment:
    """Redeem a one-time enrollment token for a participant identity and API token."""
    try:
        load_public_key(public_key)
    except ParameterError as err:
        raise ProblemError("invalid_parameter", str(err), parameter="public_key") from None
    row = session.scalars(
        select(EnrollmentToken).where(EnrollmentToken.token_hash == hash_token(token))
    ).first()
    if row is None:
        raise ProblemError("invalid_token", "unknown enrollment token")
    if row.used_at is not None:
        raise ProblemError("token_used", "this enrollment token was already redeemed")
    if row.expires_at <= now:
        raise ProblemError("token_expired", f"the enrollment token expired at {row.expires_at}")
    federation = get_federation(session, row.federation_id)
    n = federation_config(federation).n_participants
    token_id = row.id
    # Concurrent enrollments may pick the same free index; the unique constraint on
    # (federation, index) lets exactly one win and the others try the next free slot.
    for _ in range(max(16, 2 * n)):
        taken = set(
            session.scalars(
                select(Participant.lcc_index).where(Participant.federation_id == federation.id)
            )
        )
        free = [i for i in range(n) if i not in taken]
        if not free:
            raise ProblemError("federation_full", f"all {n} participant slots are taken")
        api_token = f"sfp_{secrets.token_urlsafe(32)}"
        participant = Participant(
            id=str(uuid.uuid4()),
            federation_id=federation.id,
            lcc_index=free[0],
            display_name=display_name,
            public_key=public_key,
            token_hash=hash_token(api_token),
            enrolled_at=now,
        )
        try:
            session.add(participant)
            session.flush()
            # Compare-and-set: a token raced by two requests is redeemed once.
            claimed = session.execute(
                update(EnrollmentToken)
                .where(EnrollmentToken.id == token_id, EnrollmentToken.used_at.is_(None))
                .values(used_at=now, participant_id=participant.id)
                .execution_options(synchronize_session=False)
            )
            if rowcount(claimed) != 1:
                session.rollback()
                raise ProblemError("token_used", "this enrollment token was already redeemed")
            session.commit()
        except IntegrityError:  # a concurrent enrollment took the same index: next slot
            session.rollback()
            continue
        return Enrollment(participant, api_token)
    raise ProblemError("federation_full", "no participant slot could be claimed; retry")


def authenticate_participant(session: Session, token: str | None) -> Participant:
    if not token:
        raise ProblemError("invalid_token", "a participant bearer token is required")
    participant = session.scalars(
        select(Participant).where(Participant.token_hash == hash_token(token))
    ).first()
    if participant is None:
        raise ProblemError("invalid_token", "unknown participant token")
    return participant


def enrolled_count(session: Session, federation_id: str) -> int:
    return int(
        session.scalar(
            select(func.count())
            .select_from(Participant)
            .where(Participant.federation_id == federation_id)
        )
        or 0
    )
