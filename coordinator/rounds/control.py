"""The admin's hand on a federation's lifecycle: pause, resume, abort (lifecycle.py).

Shared by the API (``POST /v1/federations/{id}/pause|resume|abort``) and the dashboard.
Pause and resume are idempotent (pausing a paused federation changes nothing); all three
refuse a federation that has ended (``federation_ended``) and commit what they change.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy.orm import Session

from secfpp.coordinator.db.models import Federation
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.rounds import lifecycle, service, store
from secfpp.coordinator.rounds.machine import TERMINAL, Stage

__all__ = ["abort", "pause", "resume"]

PAUSED_BY_ADMIN = "paused by admin"


def _with_reason(what: str, reason: str | None) -> str:
    """``what``, or ``what: reason`` when the admin gave one."""
    return f"{what}: {reason}" if reason else what


def _ended(federation: Federation) -> ProblemError:
    return ProblemError(
        "federation_ended", f"the federation has ended ({federation.status_reason})"
    )


def _change(
    session: Session,
    federation: Federation,
    *,
    expected: str,
    status: str,
    reason: str | None,
    now: datetime,
) -> Federation:
    if lifecycle.set_status(
        session, federation.id, expected={expected}, status=status, reason=reason, now=now
    ):
        session.commit()
    session.refresh(federation)
    if federation.status in lifecycle.ENDED:
        raise _ended(federation)
    return federation


def pause(
    session: Session, federation: Federation, reason: str | None, now: datetime
) -> Federation:
    """No new round starts (by the autopilot or the admin) until :func:`resume`; a
    running round goes on to its end."""
    text = _with_reason(PAUSED_BY_ADMIN, reason)
    return _change(
        session,
        federation,
        expected=lifecycle.ACTIVE,
        status=lifecycle.PAUSED,
        reason=text,
        now=now,
    )


def resume(session: Session, federation: Federation, now: datetime) -> Federation:
    """Let rounds start again (on autopilot: the next one is started by the next tick)."""
    return _change(
        session,
        federation,
        expected=lifecycle.PAUSED,
        status=lifecycle.ACTIVE,
        reason=None,
        now=now,
    )


def abort(
    session: Session, federation: Federation, reason: str | None, now: datetime
) -> Federation:
    """End the federation for good (``aborted by admin``) and abort its running round,
    whose uploads are kept; every daemon exits at its next task poll."""
    text = _with_reason(lifecycle.ABORTED_BY_ADMIN, reason)
    if not lifecycle.end(session, federation.id, text, now):
        session.rollback()
        session.refresh(federation)
        raise _ended(federation)
    session.commit()
    last = store.current_round(session, federation.id)
    if last is not None and Stage(last.stage) not in TERMINAL:
        try:
            service.abort_round(session, federation.id, last.number, text, now)
        except ProblemError as err:  # it ended meanwhile
            if err.code != "round_finished":
                raise
            session.rollback()
    session.refresh(federation)
    return federation
