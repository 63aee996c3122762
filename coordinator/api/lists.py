"""Admin list operations, paged: ``limit`` items after an opaque ``cursor``.

Each list has a stable total order (federations by creation time then id, rounds by
number, participants by LCC index), and the cursor is the sort key of the last item
returned; the next page starts strictly after it, so items created meanwhile never
shift a page.
"""

from __future__ import annotations

from datetime import UTC, datetime

from fastapi import APIRouter, Depends
from sqlalchemy import and_, or_, select

from coordinator.api.deps import SessionDep, require_admin
from coordinator.api.models import (
    FederationOut,
    FederationPage,
    ParticipantPage,
    ParticipantSummary,
    RoundPage,
    RoundSummary,
)
from coordinator.api.openapi import problems
from coordinator.api.params import (
    Cursor,
    FederationId,
    PageLimit,
    bad_cursor,
    decode_cursor,
    encode_cursor,
)
from coordinator.config import FederationConfig
from coordinator.db.models import Federation, Participant
from coordinator.federations import enrolled_count, get_federation
from coordinator.limits import INT32_MAX, MAX_PARTICIPANTS, PAGE_LIMIT_DEFAULT
from coordinator.rounds import history, store

__all__ = ["federation_out", "router"]

router = APIRouter(
    prefix="/v1/federations",
    tags=["admin"],
    dependencies=[Depends(require_admin)],
    responses=problems("invalid_token"),
)


def federation_out(session: SessionDep, federation: Federation) -> FederationOut:
    """The API view of a federation: its resolved config, enrollment count, newest round."""
    last = store.current_round(session, federation.id)
    return FederationOut(
        id=federation.id,
        name=federation.name,
        created_at=federation.created_at,
        config=FederationConfig.model_validate(federation.config),
        enrolled=enrolled_count(session, federation.id),
        current_round=None if last is None else last.number,
    )


@router.get(
    "",
    summary="List federations, oldest first, a page at a time",
    responses=problems("invalid_request"),
)
def list_federations(
    session: SessionDep, limit: PageLimit = PAGE_LIMIT_DEFAULT, cursor: Cursor = None
) -> FederationPage:
    """Federations in creation order (ties by id), with their enrollment count and newest
    round. ``next_cursor`` is null on the last page."""
    query = select(Federation)
    if cursor is not None:
        stamp, last_id = decode_cursor(cursor, (str, str))
        try:
            after = datetime.fromisoformat(stamp).astimezone(UTC)
        except (ValueError, OverflowError):
            raise bad_cursor() from None
        query = query.where(
            or_(
                Federation.created_at > after,
                and_(Federation.created_at == after, Federation.id > last_id),
            )
        )
    rows = list(
        session.scalars(query.order_by(Federation.created_at, Federation.id).limit(limit + 1))
    )
    page, more = rows[:limit], len(rows) > limit
    last = page[-1] if page else None
    return FederationPage(
        items=[federation_out(session, f) for f in page],
        next_cursor=encode_cursor(last.created_at.isoformat(), last.id) if more and last else None,
    )


@router.get(
    "/{federation_id}/rounds",
    summary="List a federation's rounds by number, a page at a time",
    responses=problems("federation_not_found", "invalid_request"),
)
def list_rounds(
    session: SessionDep,
    federation_id: FederationId,
    limit: PageLimit = PAGE_LIMIT_DEFAULT,
    cursor: Cursor = None,
) -> RoundPage:
    """Every round of the federation (oldest first) with its stage, deadline and, once
    it ended, when and why. The full status of one round is ``GET .../rounds/{number}``."""
    get_federation(session, federation_id)
    after: int | None = None
    if cursor is not None:
        (after,) = decode_cursor(cursor, (int,))
        if not 0 <= after <= INT32_MAX:
            raise bad_cursor()
    rows = history.rounds_of(session, federation_id, after=after, limit=limit + 1)
    page, more = rows[:limit], len(rows) > limit
    return RoundPage(
        items=[
            RoundSummary(
                number=r.number,
                stage=r.stage,
                started_at=r.started_at,
                deadline=r.deadline,
                finished_at=r.finished_at,
                failure_reason=r.failure_reason,
            )
            for r in page
        ],
        next_cursor=encode_cursor(page[-1].number) if more else None,
    )


@router.get(
    "/{federation_id}/participants",
    summary="List a federation's participants by LCC index, a page at a time",
    responses=problems("federation_not_found", "invalid_request"),
)
def list_participants(
    session: SessionDep,
    federation_id: FederationId,
    limit: PageLimit = PAGE_LIMIT_DEFAULT,
    cursor: Cursor = None,
) -> ParticipantPage:
    """Every participant that enrolled in the federation (revoked ones included), by
    its fixed LCC index, with its display name and when it enrolled."""
    get_federation(session, federation_id)
    query = select(Participant).where(Participant.federation_id == federation_id)
    if cursor is not None:
        (after,) = decode_cursor(cursor, (int,))
        if not 0 <= after < MAX_PARTICIPANTS:
            raise bad_cursor()
        query = query.where(Participant.lcc_index > after)
    rows = list(session.scalars(query.order_by(Participant.lcc_index).limit(limit + 1)))
    page, more = rows[:limit], len(rows) > limit
    return ParticipantPage(
        items=[
            ParticipantSummary(
                participant_id=p.id,
                index=p.lcc_index,
                display_name=p.display_name,
                enrolled_at=p.enrolled_at,
                revoked=p.revoked_at is not None,
            )
            for p in page
        ],
        next_cursor=encode_cursor(page[-1].lcc_index) if more else None,
    )
