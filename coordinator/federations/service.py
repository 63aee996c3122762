"""Federations, enrollment and participant tokens.

Tokens are random (256 bits), shown once, and stored only as SHA-256 hex digests
(:mod:`coordinator.auth.tokens`): enrollment tokens (``sfe_...``, one-time, expiring,
revocable) and participant API tokens (``sfp_...``; rotation and revocation live in
:mod:`coordinator.auth.participant_tokens`). A participant's LCC index is fixed at
enrollment: the lowest free index of the federation, so indices are ``0..N-1`` in
enrollment order. A public key can be held by one participant of a federation only.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from secfpp.coordinator.auth.tokens import (
    ENROLLMENT_PREFIX,
    PARTICIPANT_PREFIX,
    digests_equal,
    hash_token,
    new_token,
)
from secfpp.coordinator.db.models import EnrollmentToken, Federation, Participant
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.rounds import beacons
from secfpp.coordinator.rounds.store import rowcount
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.rng import RandomSource
from secfpp.crypto.transport import load_public_key
from secfpp.federation import FederationConfig, FederationCreate

__all__ = [
    "Enrollment",
    "IssuedTokens",
    "create_federation",
    "enroll",
    "federation_config",
    "get_federation",
    "hash_token",
    "issue_enrollment_tokens",
]


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
    # round 1's beacon, committed before any roster (committee) or probe (clustering)
    if beacons.uses_committee(config) or beacons.draws_probes(config):
        session.flush()
        beacons.draw_ahead(session, federation.id, 1, now)
    session.commit()
    return federation


def get_federation(session: Session, federation_id: str) -> Federation:
    federation = session.get(Federation, federation_id)
    if federation is None:
        raise ProblemError("federation_not_found", f"no federation with id {federation_id!r}")
    return federation


def federation_config(federation: Federation) -> FederationConfig:
    return FederationConfig.model_validate(federation.config)


@dataclass(frozen=True)
class IssuedTokens:
    """Enrollment tokens just issued: the tokens (shown once) and their row ids."""

    tokens: list[str]
    ids: list[int]
    expires_at: datetime


def issue_enrollment_tokens(
    session: Session,
    federation: Federation,
    count: int,
    ttl_s: int,
    now: datetime,
    rng: RandomSource | None = None,
) -> IssuedTokens:
    expires = now + timedelta(seconds=ttl_s)
    tokens = [new_token(ENROLLMENT_PREFIX, rng) for _ in range(count)]
    rows = [
        EnrollmentToken(
            federation_id=federation.id,
            token_hash=hash_token(token),
            created_at=now,
            expires_at=expires,
        )
        for token in tokens
    ]
    session.add_all(rows)
    session.commit()
    return IssuedTokens(tokens, [row.id for row in rows], expires)


@dataclass(frozen=True)
class Enrollment:
    participant: Participant
    api_token: str


def enroll(
    session: Session,
    *,
    token: str,
    display_name: str,
    public_key: bytes,
    now: datetime,
    rng: RandomSource | None = None,
) -> Enrollment:
    """Redeem a one-time enrollment token for a participant identity and API token.

    Refusals: ``invalid_token``/``token_revoked``/``token_expired`` (401), ``token_used``,
    ``public_key_taken``, ``federation_full`` (409), ``invalid_parameter`` (422).
    """
    try:
        load_public_key(public_key)
    except ParameterError as err:
        raise ProblemError("invalid_parameter", str(err), parameter="public_key") from None
    digest = hash_token(token)
    row = session.scalars(
        select(EnrollmentToken).where(EnrollmentToken.token_hash == digest)
    ).first()
    if row is None or not digests_equal(row.token_hash, digest):
        raise ProblemError("invalid_token", "unknown enrollment token")
    if row.used_at is not None:
        raise ProblemError("token_used", "this enrollment token was already redeemed")
    if row.revoked_at is not None:
        raise ProblemError("token_revoked", "this enrollment token was revoked by the admin")
    if row.expires_at <= now:
        raise ProblemError("token_expired", f"the enrollment token expired at {row.expires_at}")
    federation = get_federation(session, row.federation_id)
    n = federation_config(federation).n_participants
    token_id = row.id
    # Concurrent enrollments may pick the same free index; the unique constraint on
    # (federation, index) lets exactly one win and the others try the next free slot; the
    # unique (federation, public key) index makes a raced duplicate key fail the same way,
    # and the next attempt's check below names it.
    for attempt in range(max(16, 2 * n)):
        if session.scalars(
            select(Participant.id).where(
                Participant.federation_id == federation.id, Participant.public_key == public_key
            )
        ).first():
            raise ProblemError(
                "public_key_taken",
                "another participant of this federation holds this public key; "
                "every participant needs its own key pair",
            )
        taken = set(
            session.scalars(
                select(Participant.lcc_index).where(Participant.federation_id == federation.id)
            )
        )
        free = [i for i in range(n) if i not in taken]
        if not free:
            raise ProblemError("federation_full", f"all {n} participant slots are taken")
        api_token = new_token(PARTICIPANT_PREFIX, rng)
        # The lowest free slot first; after a lost race a random free one, so that a
        # thousand concurrent enrollments do not all queue on the same index (on
        # PostgreSQL each waits for the winner's commit before its insert fails).
        index = free[0] if attempt == 0 else free[secrets.randbelow(len(free))]
        participant = Participant(
            id=str(uuid.uuid4()),
            federation_id=federation.id,
            lcc_index=index,
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
                .where(
                    EnrollmentToken.id == token_id,
                    EnrollmentToken.used_at.is_(None),
                    EnrollmentToken.revoked_at.is_(None),
                )
                .values(used_at=now, participant_id=participant.id)
                .execution_options(synchronize_session=False)
            )
            if rowcount(claimed) != 1:
                session.rollback()
                raise ProblemError(
                    "token_used", "this enrollment token was already redeemed or revoked"
                )
            session.commit()
        except IntegrityError:  # a concurrent enrollment took the same index: next slot
            session.rollback()
            continue
        return Enrollment(participant, api_token)
    raise ProblemError("federation_full", "no participant slot could be claimed; retry")


def enrolled_count(session: Session, federation_id: str) -> int:
    return int(
        session.scalar(
            select(func.count())
            .select_from(Participant)
            .where(Participant.federation_id == federation_id)
        )
        or 0
    )
