"""Admin list operations, paged: ``limit`` items after an opaque ``cursor``.

Each list has a stable total order (federations by creation time then id, rounds by
number, participants by LCC index), and the cursor is the sort key of the last item
returned; the next page starts strictly after it, so items created meanwhile never
shift a page.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from fastapi import APIRouter, Depends
from sqlalchemy import and_, or_, select
from sqlalchemy.orm import Session

from secfpp.coordinator.api.body import GuardedRoute
from secfpp.coordinator.api.deps import SessionDep, require_admin
from secfpp.coordinator.api.openapi import problems
from secfpp.coordinator.api.params import (
    Cursor,
    FederationCursor,
    FederationId,
    PageLimit,
    federation_cursor,
    int_cursor,
    read_federation_cursor,
    read_int_cursor,
)
from secfpp.coordinator.api.schemas.federations import (
    FederationOut,
    FederationPage,
    ParticipantPage,
    ParticipantSummary,
    RoundPage,
    RoundSummary,
)
from secfpp.coordinator.db.models import Federation, Participant
from secfpp.coordinator.federations.service import enrolled_count, get_federation
from secfpp.coordinator.rounds import history, store
from secfpp.federation import FederationConfig
from secfpp.wire.limits import INT32_MAX, MAX_PARTICIPANTS, PAGE_LIMIT_DEFAULT
from secfpp.wire.messages import FederationStatus

__all__ = ["federation_out", "router"]

T = TypeVar("T")
Page = tuple[Sequence[T], str | None]  # one page of items and the next page's cursor

router = APIRouter(
    prefix="/v1/federations",
    tags=["admin"],
    route_class=GuardedRoute,
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
        status=FederationStatus.model_validate(
            {
                "state": federation.status,
                "reason": federation.status_reason,
                "ended_at": federation.ended_at,
            }
        ),
    )


def _page(rows: Sequence[T], limit: int, cursor: Callable[[T], str]) -> Page[T]:
    """The first ``limit`` of ``rows`` (fetched with ``limit + 1``, one more than a page) and
    the cursor of the next page, after the page's last item (None: this is the last)."""
    page = rows[:limit]
    more = len(rows) > limit and len(page) > 0
    return page, cursor(page[-1]) if more else None


def _int_page(
    session: Session,
    federation_id: str,
    limit: int,
    cursor: str | None,
    *,
    last_key: int,
    fetch: Callable[[int | None, int], Sequence[T]],
    key: Callable[[T], int],
) -> Page[T]:
    """A page of a federation's list ordered by an integer key (round number, LCC index).

    ``federation_not_found`` for an unknown federation; ``fetch(after, n)`` returns at most
    ``n`` items with a key above ``after`` (None: from the first), in key order (a cursor
    past ``last_key`` gives an empty page).
    """
    get_federation(session, federation_id)
    after = None if cursor is None else min(read_int_cursor(cursor), last_key)
    return _page(fetch(after, limit + 1), limit, lambda item: int_cursor(key(item)))


@router.get(
    "",
    summary="List federations, oldest first, a page at a time",
    responses=problems("invalid_request"),
)
def list_federations(
    session: SessionDep, limit: PageLimit = PAGE_LIMIT_DEFAULT, cursor: FederationCursor = None
) -> FederationPage:
    """Federations in creation order (ties by id), with their enrollment count and newest
    round. ``next_cursor`` is null on the last page."""
    query = select(Federation)
    if cursor is not None:
        after, last_id = read_federation_cursor(cursor)
        query = query.where(
            or_(
                Federation.created_at > after,
                and_(Federation.created_at == after, Federation.id > last_id),
            )
        )
    rows = list(
        session.scalars(query.order_by(Federation.created_at, Federation.id).limit(limit + 1))
    )
    page, next_cursor = _page(rows, limit, lambda f: federation_cursor(f.created_at, f.id))
    return FederationPage(items=[federation_out(session, f) for f in page], next_cursor=next_cursor)


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
    page, next_cursor = _int_page(
        session,
        federation_id,
        limit,
        cursor,
        last_key=INT32_MAX,
        fetch=lambda after, n: history.rounds_of(session, federation_id, after=after, limit=n),
        key=lambda r: r.number,
    )
    return RoundPage(
        items=[RoundSummary.model_validate(r, from_attributes=True) for r in page],
        next_cursor=next_cursor,
    )


def _participants_after(
    session: Session, federation_id: str, after: int | None, n: int
) -> list[Participant]:
    """At most ``n`` participants of the federation with an LCC index above ``after``."""
    query = select(Participant).where(Participant.federation_id == federation_id)
    if after is not None:
        query = query.where(Participant.lcc_index > after)
    return list(session.scalars(query.order_by(Participant.lcc_index).limit(n)))


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
    page, next_cursor = _int_page(
        session,
        federation_id,
        limit,
        cursor,
        last_key=MAX_PARTICIPANTS - 1,
        fetch=lambda after, n: _participants_after(session, federation_id, after, n),
        key=lambda p: p.lcc_index,
    )
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
        next_cursor=next_cursor,
    )
