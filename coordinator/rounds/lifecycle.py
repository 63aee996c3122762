"""The federation's lifecycle status: ``active``, ``paused``, ``finished`` or ``aborted``.

::

    active <──resume── paused
      │  └──pause──────^  │
      ├──> finished (rounds done | privacy budget spent)
      └──> aborted (by admin) <──┘

``finished`` and ``aborted`` are terminal: no round starts again, every participant's
task says so (``federation.state``) and the daemons exit. ``paused`` only stops new
rounds (a running round goes on to its end); a paused federation still finishes when its
last round ends. Every change is one compare-and-set ``UPDATE federations ... WHERE id
= :id AND status IN (:expected)``, so two replicas (or an admin and the autopilot) never
both apply one. The caller commits.
"""

from __future__ import annotations

from collections.abc import Collection
from datetime import datetime
from typing import Final

from sqlalchemy import update
from sqlalchemy.orm import Session

from secfpp.coordinator.db.models import Federation
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.rounds.store import rowcount

__all__ = [
    "ABORTED",
    "ABORTED_BY_ADMIN",
    "ACTIVE",
    "BUDGET_SPENT",
    "ENDED",
    "FINISHED",
    "LIVE",
    "PAUSED",
    "ROUNDS_DONE",
    "end",
    "require_startable",
    "set_status",
]

ACTIVE: Final = "active"
PAUSED: Final = "paused"
FINISHED: Final = "finished"
ABORTED: Final = "aborted"
LIVE = frozenset({ACTIVE, PAUSED})
ENDED = frozenset({FINISHED, ABORTED})

ROUNDS_DONE: Final = "finished: rounds done"
BUDGET_SPENT: Final = "finished: privacy budget spent"
ABORTED_BY_ADMIN: Final = "aborted by admin"


def set_status(
    session: Session,
    federation_id: str,
    *,
    expected: Collection[str],
    status: str,
    reason: str | None,
    now: datetime,
) -> bool:
    """Move the federation from one of ``expected`` to ``status`` (compare-and-set);
    False when it was in none of them (another request or replica moved first)."""
    result = session.execute(
        update(Federation)
        .where(Federation.id == federation_id, Federation.status.in_(list(expected)))
        .values(status=status, status_reason=reason, ended_at=now if status in ENDED else None)
        .execution_options(synchronize_session=False)
    )
    return rowcount(result) == 1


def end(session: Session, federation_id: str, reason: str, now: datetime) -> bool:
    """End a live federation for good: ``finished`` (``reason`` starts with it) or
    ``aborted``. False when it had already ended."""
    status = FINISHED if reason.startswith(FINISHED) else ABORTED
    return set_status(session, federation_id, expected=LIVE, status=status, reason=reason, now=now)


def require_startable(session: Session, federation: Federation) -> None:
    """Refuse a round start unless the federation is ``active``, and hold its row until
    the caller's transaction ends (PostgreSQL: a row lock, so that a concurrent pause or
    abort either commits first and is seen here, or waits for this start)."""
    held = session.execute(
        update(Federation)
        .where(Federation.id == federation.id, Federation.status == ACTIVE)
        .values(status=ACTIVE)
        .execution_options(synchronize_session=False)
    )
    if rowcount(held) == 1:
        return
    session.refresh(federation)
    if federation.status == PAUSED:
        raise ProblemError(
            "federation_paused", "the federation is paused: resume it to start rounds"
        )
    detail = f"the federation has ended ({federation.status_reason})"
    # The codes a start got before the federation had a lifecycle stay what they were.
    code = {ROUNDS_DONE: "rounds_exhausted", BUDGET_SPENT: "privacy_budget_exceeded"}.get(
        federation.status_reason or "", "federation_ended"
    )
    raise ProblemError(code, detail)
