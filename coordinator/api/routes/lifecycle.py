"""Admin routes of a federation's lifecycle: pause, resume, abort (rounds/control.py).

Each answers the federation's view, ``status`` included; the body (a reason) is optional.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends

from secfpp.coordinator.api.body import GuardedRoute
from secfpp.coordinator.api.deps import Now, SessionDep, require_admin
from secfpp.coordinator.api.params import FederationId
from secfpp.coordinator.api.routes.admin import ERRORS, PROBLEM
from secfpp.coordinator.api.routes.lists import federation_out
from secfpp.coordinator.api.schemas.federations import FederationOut, LifecycleRequest
from secfpp.coordinator.federations.service import get_federation
from secfpp.coordinator.rounds import control

__all__ = ["router"]

ENDED: dict[int | str, dict[str, Any]] = {
    409: {"description": "`federation_ended`: it has finished or was aborted", **PROBLEM}
}

router = APIRouter(
    prefix="/v1/federations",
    tags=["admin"],
    dependencies=[Depends(require_admin)],
    responses={k: {**v, **PROBLEM} for k, v in ERRORS.items()},
    route_class=GuardedRoute,
)


@router.post(
    "/{federation_id}/pause",
    summary="Pause a federation: no new round starts until it is resumed",
    responses=ENDED,
)
def pause(
    session: SessionDep,
    now: Now,
    federation_id: FederationId,
    request: LifecycleRequest | None = None,
) -> FederationOut:
    """Stop starting rounds (autopilot and ``POST .../rounds`` alike); the running round,
    if any, goes on to its end. Pausing a paused federation changes nothing."""
    federation = get_federation(session, federation_id)
    reason = None if request is None else request.reason
    return federation_out(session, control.pause(session, federation, reason, now))


@router.post(
    "/{federation_id}/resume",
    summary="Resume a paused federation",
    responses=ENDED,
)
def resume(session: SessionDep, now: Now, federation_id: FederationId) -> FederationOut:
    """Let rounds start again; on autopilot the next round starts within a deadline tick.
    Resuming an active federation changes nothing."""
    federation = get_federation(session, federation_id)
    return federation_out(session, control.resume(session, federation, now))


@router.post(
    "/{federation_id}/abort",
    summary="Abort a federation for good (and its running round)",
    responses=ENDED,
)
def abort(
    session: SessionDep,
    now: Now,
    federation_id: FederationId,
    request: LifecycleRequest | None = None,
) -> FederationOut:
    """End the federation in state ``aborted`` (reason ``aborted by admin[: reason]``):
    its running round is aborted (uploads kept), no round starts again, and every
    participant's task says so, so that the daemons exit."""
    federation = get_federation(session, federation_id)
    reason = None if request is None else request.reason
    return federation_out(session, control.abort(session, federation, reason, now))
