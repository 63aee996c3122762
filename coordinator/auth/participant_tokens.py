"""Participant and enrollment tokens over their lifetime: authenticate, rotate, revoke, list.

* Revoking a participant sets ``revoked_at``: its token fails at once (the next request
  gets 401), it is left out of every round started afterwards (it keeps its LCC index,
  which no one else gets, and its rows: past rounds, uploads, metrics stay as they
  were). A round already running drops it at the stage deadline like any silent member.
  Revocation is final and idempotent.
* Rotating replaces the token's digest in one compare-and-set update (only while the
  participant is not revoked); the old token fails from that commit on.
* An enrollment token is ``unused``, ``used``, ``expired`` or ``revoked``; only an unused
  (or expired, never redeemed) one can be revoked, in a compare-and-set with redemption,
  so a token is either redeemed or revoked, never both.

Every state change is one transaction; nothing here returns or logs a token's digest.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from sqlalchemy import ColumnElement, and_, select, update
from sqlalchemy.orm import Session

from secfpp.coordinator.auth.tokens import (
    PARTICIPANT_PREFIX,
    digests_equal,
    hash_token,
    new_token,
    touch_last_used,
)
from secfpp.coordinator.db.models import EnrollmentToken, Participant
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.rounds.store import rowcount
from secfpp.crypto.rng import RandomSource

__all__ = [
    "EnrollmentState",
    "authenticate_participant",
    "enrollment_state",
    "get_participant",
    "list_enrollment_tokens",
    "participants_of",
    "revoke_enrollment_token",
    "revoke_participant",
    "revoke_unused_enrollment_tokens",
    "rotate_participant_token",
]

EnrollmentState = Literal["unused", "used", "expired", "revoked"]


def authenticate_participant(session: Session, token: str | None, now: datetime) -> Participant:
    """The participant holding ``token``; ``invalid_token`` (401) if none does or it was
    revoked (the same answer either way)."""
    if not token:
        raise ProblemError("invalid_token", "a participant bearer token is required")
    digest = hash_token(token)
    participant = session.scalars(
        select(Participant).where(Participant.token_hash == digest)
    ).first()
    if (
        participant is None
        or participant.revoked_at is not None
        or not digests_equal(participant.token_hash, digest)
    ):
        raise ProblemError("invalid_token", "unknown or revoked participant token")
    touch_last_used(
        session,
        Participant.id == participant.id,
        Participant.token_last_used_at,
        participant.token_last_used_at,
        now,
    )
    return participant


def get_participant(session: Session, federation_id: str, participant_id: str) -> Participant:
    participant = session.get(Participant, participant_id)
    if participant is None or participant.federation_id != federation_id:
        raise ProblemError(
            "participant_not_found",
            f"federation {federation_id!r} has no participant {participant_id!r}",
        )
    return participant


def participants_of(session: Session, federation_id: str) -> list[Participant]:
    """Every participant ever enrolled in the federation, by LCC index."""
    return list(
        session.scalars(
            select(Participant)
            .where(Participant.federation_id == federation_id)
            .order_by(Participant.lcc_index)
        )
    )


def revoke_participant(
    session: Session, federation_id: str, participant_id: str, now: datetime
) -> Participant:
    """Revoke the participant (idempotent: a second call changes nothing)."""
    participant = get_participant(session, federation_id, participant_id)
    session.execute(
        update(Participant)
        .where(Participant.id == participant.id, Participant.revoked_at.is_(None))
        .values(revoked_at=now)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    session.refresh(participant)
    return participant


def rotate_participant_token(
    session: Session,
    federation_id: str,
    participant_id: str,
    now: datetime,
    rng: RandomSource | None = None,
) -> tuple[Participant, str]:
    """A new API token for the participant (returned once); the old one stops working.

    Raises ``participant_revoked`` (409) for a revoked participant.
    """
    participant = get_participant(session, federation_id, participant_id)
    token = new_token(PARTICIPANT_PREFIX, rng)
    changed = session.execute(
        update(Participant)
        .where(Participant.id == participant.id, Participant.revoked_at.is_(None))
        .values(token_hash=hash_token(token), token_rotated_at=now, token_last_used_at=None)
        .execution_options(synchronize_session=False)
    )
    if rowcount(changed) != 1:
        session.rollback()
        raise ProblemError(
            "participant_revoked", f"participant {participant_id!r} was revoked; it gets no token"
        )
    session.commit()
    session.refresh(participant)
    return participant, token


# -- enrollment tokens ---------------------------------------------------------------------


def enrollment_state(row: EnrollmentToken, now: datetime) -> EnrollmentState:
    if row.used_at is not None:
        return "used"
    if row.revoked_at is not None:
        return "revoked"
    return "expired" if row.expires_at <= now else "unused"


def _state_filter(state: EnrollmentState, now: datetime) -> ColumnElement[bool]:
    open_ = and_(EnrollmentToken.used_at.is_(None), EnrollmentToken.revoked_at.is_(None))
    return {
        "used": EnrollmentToken.used_at.is_not(None),
        "revoked": and_(EnrollmentToken.used_at.is_(None), EnrollmentToken.revoked_at.is_not(None)),
        "expired": and_(open_, EnrollmentToken.expires_at <= now),
        "unused": and_(open_, EnrollmentToken.expires_at > now),
    }[state]


def list_enrollment_tokens(
    session: Session,
    federation_id: str,
    now: datetime,
    *,
    state: EnrollmentState | None = None,
    after: int | None = None,
    limit: int = 100,
) -> list[EnrollmentToken]:
    """The federation's enrollment tokens in issue order (id), ``limit`` after id ``after``."""
    query = select(EnrollmentToken).where(EnrollmentToken.federation_id == federation_id)
    if state is not None:
        query = query.where(_state_filter(state, now))
    if after is not None:
        query = query.where(EnrollmentToken.id > after)
    return list(session.scalars(query.order_by(EnrollmentToken.id).limit(limit)))


def _enrollment_token(session: Session, federation_id: str, token_id: int) -> EnrollmentToken:
    row = session.get(EnrollmentToken, token_id)
    if row is None or row.federation_id != federation_id:
        raise ProblemError(
            "token_not_found", f"federation {federation_id!r} has no enrollment token {token_id}"
        )
    return row


def revoke_enrollment_token(
    session: Session, federation_id: str, token_id: int, now: datetime
) -> EnrollmentToken:
    """Revoke one enrollment token that was not redeemed (idempotent).

    Raises ``token_used`` (409) if it was redeemed: revoke the participant instead.
    """
    row = _enrollment_token(session, federation_id, token_id)
    session.execute(
        update(EnrollmentToken)
        .where(
            EnrollmentToken.id == token_id,
            EnrollmentToken.used_at.is_(None),
            EnrollmentToken.revoked_at.is_(None),
        )
        .values(revoked_at=now)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    session.refresh(row)
    if row.used_at is not None:
        raise ProblemError(
            "token_used",
            f"enrollment token {token_id} was redeemed by participant {row.participant_id}; "
            "revoke the participant instead",
            participant_id=row.participant_id,
        )
    return row


def revoke_unused_enrollment_tokens(
    session: Session, federation_id: str, now: datetime
) -> list[int]:
    """Revoke every unused, unexpired enrollment token of the federation; their ids."""
    revoked = session.scalars(
        update(EnrollmentToken)
        .where(EnrollmentToken.federation_id == federation_id, _state_filter("unused", now))
        .values(revoked_at=now)
        .returning(EnrollmentToken.id)
        .execution_options(synchronize_session=False)
    ).all()
    session.commit()
    return sorted(revoked)
