"""Admin routes: federations, enrollment tokens, rounds. Every route needs the admin token.

The paged lists (federations, rounds, participants) are in :mod:`coordinator.api.routes.lists`.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, status

from secfpp.coordinator.api.body import GuardedRoute
from secfpp.coordinator.api.deps import DriverDep, Now, SessionDep, SettingsDep, require_admin
from secfpp.coordinator.api.params import FederationId, RoundNumber
from secfpp.coordinator.api.routes.lists import federation_out
from secfpp.coordinator.api.schemas.federations import (
    AbortRequest,
    EnrollmentTokens,
    EnrollmentTokensRequest,
    FederationOut,
)
from secfpp.coordinator.federations.service import (
    create_federation,
    federation_config,
    get_federation,
    issue_enrollment_tokens,
)
from secfpp.coordinator.rounds import service, store, views
from secfpp.coordinator.rounds.driver import RoundDriver
from secfpp.coordinator.rounds.participant_metrics import federation_metrics
from secfpp.federation import FederationCreate
from secfpp.wire.messages import FederationMetrics, RoundStatus

__all__ = ["router"]

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or wrong admin token (`invalid_token`)"},
    404: {"description": "`federation_not_found` or `round_not_found`"},
    429: {
        "description": "`rate_limited`: too many authentication failures from this address "
        "(see `Retry-After`)"
    },
}
PROBLEM: dict[str, Any] = {"content": {"application/problem+json": {}}}

router = APIRouter(
    prefix="/v1/federations",
    tags=["admin"],
    route_class=GuardedRoute,
    dependencies=[Depends(require_admin)],
    responses={k: {**v, **PROBLEM} for k, v in ERRORS.items()},
)

FEDERATION_EXAMPLE = {
    "name": "radiology-8",
    "strategy": "secfpp",
    "n_participants": 8,
    "prompt": {"n_ctx": 16, "dim": 512},
    "tolerance": {"reduced_dim": 128, "dropout_fraction": 0.25, "collusion_fraction": 0.25},
    "rounds": {"total": 20, "warmup_rounds": 1, "lr_global": 1.0, "schedule": "auto"},
    "deadlines": {"sharing_s": 3600, "distances_s": 600, "aggregation_s": 600},
    "dp": {"mechanism": "none"},
}


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
    summary="Create a federation (participants, prompt shape, codes, deadlines, privacy)",
    responses={422: {"description": "Invalid or unsafe configuration (`invalid_parameter`)"}},
)
def create(
    session: SessionDep,
    now: Now,
    request: Annotated[
        FederationCreate, Body(openapi_examples={"secfpp": {"value": FEDERATION_EXAMPLE}})
    ],
) -> FederationOut:
    """Create a federation. ``crypto`` may be given explicitly; otherwise it is derived
    from ``tolerance`` (dropouts and colluders tolerated, largest safe quantization)."""
    return federation_out(session, create_federation(session, request, now))


@router.get("/{federation_id}", summary="Read a federation's resolved configuration")
def get(session: SessionDep, federation_id: FederationId) -> FederationOut:
    """The federation's stored configuration (crypto parameters resolved at creation),
    how many participants enrolled and its newest round."""
    return federation_out(session, get_federation(session, federation_id))


@router.post(
    "/{federation_id}/enrollment-tokens",
    status_code=status.HTTP_201_CREATED,
    summary="Issue one-time enrollment tokens for participants",
)
def enrollment_tokens(
    session: SessionDep,
    settings: SettingsDep,
    now: Now,
    federation_id: FederationId,
    request: EnrollmentTokensRequest,
) -> EnrollmentTokens:
    """Issue one-time enrollment tokens (shown only in this response) and their ids, by
    which ``GET``/``DELETE .../enrollment-tokens`` list and revoke them."""
    federation = get_federation(session, federation_id)
    ttl = request.ttl_s or settings.enrollment_token_ttl_s
    issued = issue_enrollment_tokens(session, federation, request.count, ttl, now)
    return EnrollmentTokens(
        federation_id=federation.id,
        tokens=issued.tokens,
        ids=issued.ids,
        expires_at=issued.expires_at,
    )


def _drive_current(session: SessionDep, driver: RoundDriver, federation_id: str) -> None:
    last = store.current_round(session, federation_id)
    if last is not None:
        driver.drive(last.id, session=session)  # one connection per request
    session.expire_all()


@router.post(
    "/{federation_id}/rounds",
    status_code=status.HTTP_201_CREATED,
    summary="Start the federation's next round",
    responses={
        409: {
            "description": "`round_in_progress`, `enrollment_incomplete`, `rounds_exhausted` "
            "or `privacy_budget_exceeded` (both end the federation: `status.state` "
            "finished), `federation_paused` or `federation_ended`",
            **PROBLEM,
        }
    },
)
def start(
    session: SessionDep, driver: DriverDep, now: Now, federation_id: FederationId
) -> RoundStatus:
    """Start the next round (stage ``sharing``, deadline ``deadlines.sharing_s``); the
    previous one must have ended and every participant must have enrolled."""
    federation = get_federation(session, federation_id)
    _drive_current(session, driver, federation_id)
    rnd = service.start_round(session, federation, now)
    return views.round_status(session, rnd, federation_config(federation))


@router.get(
    "/{federation_id}/rounds/{number}",
    summary="Watch a round: stage, deadline, uploads, dropouts, clusters, events",
)
def round_status(
    session: SessionDep, driver: DriverDep, federation_id: FederationId, number: RoundNumber
) -> RoundStatus:
    """Stage, deadline, uploads, dropouts, clusters and the event log of a round."""
    federation = get_federation(session, federation_id)
    rnd = service.get_round(session, federation_id, number)
    driver.drive(rnd.id, session=session)  # one connection per request
    session.refresh(rnd)
    return views.round_status(session, rnd, federation_config(federation))


@router.get(
    "/{federation_id}/metrics",
    summary="Read the metrics participants reported, per round and participant",
)
def reported_metrics(session: SessionDep, federation_id: FederationId) -> FederationMetrics:
    """Every round (oldest first) with the metrics its participants reported:
    participant index -> name -> value, e.g. accuracy per round per participant."""
    get_federation(session, federation_id)
    return federation_metrics(session, federation_id)


@router.post(
    "/{federation_id}/rounds/{number}/abort",
    summary="Abort an unfinished round",
    responses={409: {"description": "`round_finished`", **PROBLEM}},
)
def abort(
    session: SessionDep,
    now: Now,
    federation_id: FederationId,
    number: RoundNumber,
    request: AbortRequest | None = None,
) -> RoundStatus:
    """End round ``number`` in stage ``aborted`` with ``reason`` (the body is optional);
    its uploads are kept, nothing is published, and the next round may start."""
    federation = get_federation(session, federation_id)
    reason = (request or AbortRequest()).reason
    rnd = service.abort_round(session, federation_id, number, reason, now)
    return views.round_status(session, rnd, federation_config(federation))
