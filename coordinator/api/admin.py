"""Admin routes: federations, enrollment tokens, rounds. Every route needs the admin token."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Depends, status
from sqlalchemy import select

from coordinator.api.deps import DriverDep, Now, SessionDep, SettingsDep, require_admin
from coordinator.api.models import (
    AbortRequest,
    EnrollmentTokens,
    EnrollmentTokensRequest,
    FederationMetrics,
    FederationOut,
    RoundStatus,
)
from coordinator.config import FederationConfig, FederationCreate
from coordinator.db.models import Federation
from coordinator.federations import (
    create_federation,
    enrolled_count,
    federation_config,
    get_federation,
    issue_enrollment_tokens,
)
from coordinator.rounds import service, store, views
from coordinator.rounds.driver import RoundDriver
from coordinator.rounds.participant_metrics import federation_metrics

__all__ = ["router"]

ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "Missing or wrong admin token (`invalid_token`)"},
    404: {"description": "No such federation or round"},
}
PROBLEM: dict[str, Any] = {"content": {"application/problem+json": {}}}

router = APIRouter(
    prefix="/v1/federations",
    tags=["admin"],
    dependencies=[Depends(require_admin)],
    responses={k: {**v, **PROBLEM} for k, v in ERRORS.items()},
)

FEDERATION_EXAMPLE = {
    "name": "radiology-8",
    "strategy": "secfpp",
    "n_participants": 8,
    "prompt": {"n_ctx": 16, "dim": 512},
    "tolerance": {"reduced_dim": 128, "dropout_fraction": 0.25, "collusion_fraction": 0.25},
    "rounds": {"total": 20, "warmup_rounds": 1, "lr_global": 1.0},
    "deadlines": {"sharing_s": 3600, "distances_s": 600, "aggregation_s": 600},
    "dp": {"mechanism": "none"},
}


def _out(session: SessionDep, federation: Federation) -> FederationOut:
    last = store.current_round(session, federation.id)
    return FederationOut(
        id=federation.id,
        name=federation.name,
        created_at=federation.created_at,
        config=FederationConfig.model_validate(federation.config),
        enrolled=enrolled_count(session, federation.id),
        current_round=None if last is None else last.number,
    )


@router.post(
    "",
    status_code=status.HTTP_201_CREATED,
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
    return _out(session, create_federation(session, request, now))


@router.get("")
def list_federations(session: SessionDep) -> list[FederationOut]:
    rows = session.scalars(select(Federation).order_by(Federation.created_at))
    return [_out(session, f) for f in rows]


@router.get("/{federation_id}")
def get(session: SessionDep, federation_id: str) -> FederationOut:
    return _out(session, get_federation(session, federation_id))


@router.post("/{federation_id}/enrollment-tokens", status_code=status.HTTP_201_CREATED)
def enrollment_tokens(
    session: SessionDep,
    settings: SettingsDep,
    now: Now,
    federation_id: str,
    request: EnrollmentTokensRequest,
) -> EnrollmentTokens:
    """Issue one-time enrollment tokens (shown only in this response)."""
    federation = get_federation(session, federation_id)
    ttl = request.ttl_s or settings.enrollment_token_ttl_s
    tokens, expires = issue_enrollment_tokens(session, federation, request.count, ttl, now)
    return EnrollmentTokens(federation_id=federation.id, tokens=tokens, expires_at=expires)


def _drive_current(session: SessionDep, driver: RoundDriver, federation_id: str) -> None:
    last = store.current_round(session, federation_id)
    if last is not None:
        driver.drive(last.id)
    session.expire_all()


@router.post(
    "/{federation_id}/rounds",
    status_code=status.HTTP_201_CREATED,
    responses={
        409: {
            "description": "`round_in_progress`, `enrollment_incomplete`, `rounds_exhausted` "
            "or `privacy_budget_exceeded`",
            **PROBLEM,
        }
    },
)
def start(session: SessionDep, driver: DriverDep, now: Now, federation_id: str) -> RoundStatus:
    """Start the next round (stage ``sharing``)."""
    federation = get_federation(session, federation_id)
    _drive_current(session, driver, federation_id)
    rnd = service.start_round(session, federation, now)
    return views.round_status(session, rnd, federation_config(federation))


@router.get("/{federation_id}/rounds/{number}")
def round_status(
    session: SessionDep, driver: DriverDep, federation_id: str, number: int
) -> RoundStatus:
    """Stage, deadline, uploads, dropouts, clusters and the event log of a round."""
    federation = get_federation(session, federation_id)
    rnd = service.get_round(session, federation_id, number)
    driver.drive(rnd.id)
    session.refresh(rnd)
    return views.round_status(session, rnd, federation_config(federation))


@router.get("/{federation_id}/metrics")
def reported_metrics(session: SessionDep, federation_id: str) -> FederationMetrics:
    """Every round (oldest first) with the metrics its participants reported:
    participant index -> name -> value, e.g. accuracy per round per participant."""
    get_federation(session, federation_id)
    return federation_metrics(session, federation_id)


@router.post(
    "/{federation_id}/rounds/{number}/abort",
    responses={409: {"description": "`round_finished`", **PROBLEM}},
)
def abort(
    session: SessionDep,
    now: Now,
    federation_id: str,
    number: int,
    request: AbortRequest | None = None,
) -> RoundStatus:
    federation = get_federation(session, federation_id)
    reason = (request or AbortRequest()).reason
    rnd = service.abort_round(session, federation_id, number, reason, now)
    return views.round_status(session, rnd, federation_config(federation))
