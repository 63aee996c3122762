"""A federation's history as stored: rounds with their event logs, uploads so far,
participants' last activity and the privacy ledger's refusals.

Read-only queries shared by the API and the dashboard (one copy of each query). Each
function issues a fixed number of statements, independent of the number of rounds, so
a page over 50 rounds of 100 participants costs a handful of round trips.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from secfpp.coordinator.db.models import (
    CodedResult,
    LedgerRefusal,
    Round,
    RoundEvent,
    ShareEnvelope,
)
from secfpp.coordinator.rounds.machine import Stage

__all__ = [
    "events_by_round",
    "ledger_refusals",
    "record_ledger_refusal",
    "rounds_of",
    "uploaded_by",
]


def rounds_of(
    session: Session, federation_id: str, *, after: int | None = None, limit: int | None = None
) -> list[Round]:
    """The federation's rounds by number, those numbered above ``after``, at most ``limit``."""
    query = select(Round).where(Round.federation_id == federation_id)
    if after is not None:
        query = query.where(Round.number > after)
    query = query.order_by(Round.number)
    if limit is not None:
        query = query.limit(limit)
    return list(session.scalars(query))


def events_by_round(session: Session, round_ids: Sequence[str]) -> dict[str, list[RoundEvent]]:
    """The event log of each of ``round_ids`` (by version), in one query."""
    out: dict[str, list[RoundEvent]] = {rid: [] for rid in round_ids}
    if not round_ids:
        return out
    rows = session.scalars(
        select(RoundEvent)
        .where(RoundEvent.round_id.in_(list(round_ids)))
        .order_by(RoundEvent.round_id, RoundEvent.version)
    )
    for event in rows:
        out[event.round_id].append(event)
    return out


def uploaded_by(session: Session, round_id: str, stage: Stage) -> list[int]:
    """Participants whose upload of ``stage`` was accepted so far (no payloads read)."""
    if stage is Stage.SHARING:
        query = select(ShareEnvelope.sender).where(ShareEnvelope.round_id == round_id)
    else:
        query = select(CodedResult.participant).where(
            CodedResult.round_id == round_id, CodedResult.stage == stage.value
        )
    return sorted({int(i) for i in session.scalars(query.distinct())})


def record_ledger_refusal(
    session: Session, federation_id: str, round_number: int, reason: str, now: datetime
) -> None:
    """Remember that the privacy ledger refused to start round ``round_number``.

    Rolls back whatever the caller's transaction had written (the refused round must
    leave nothing behind) and commits the refusal on its own.
    """
    session.rollback()
    session.add(
        LedgerRefusal(
            federation_id=federation_id, round_number=round_number, reason=reason, created_at=now
        )
    )
    session.commit()


def ledger_refusals(session: Session, federation_id: str) -> list[LedgerRefusal]:
    """Every round start the ledger refused, oldest first."""
    return list(
        session.scalars(
            select(LedgerRefusal)
            .where(LedgerRefusal.federation_id == federation_id)
            .order_by(LedgerRefusal.id)
        )
    )
