"""Participant routes: enroll, task, shares, inbox, coded results, refusals, outcome,
metrics.

Every route but ``/v1/enroll`` needs the participant's bearer token. Each first lets
the driver make any transition that is due (so deadlines are enforced even when the
background task is behind), then does its work, then drives again (an upload may
complete a stage).
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Request, status
from pydantic import ValidationError

from coordinator.api.deps import CurrentParticipant, DriverDep, MetricsDep, Now, SessionDep
from coordinator.api.models import (
    EnrollRequest,
    EnrollResponse,
    Inbox,
    MetricsReceipt,
    MetricsUpload,
    ParticipantOut,
    RefusalIn,
    ResultUpload,
    RoundOutcome,
    ShareUpload,
    Task,
    UploadReceipt,
)
from coordinator.config import FederationConfig
from coordinator.db.models import Participant
from coordinator.errors import ProblemError
from coordinator.federations import enroll as enroll_participant
from coordinator.federations import federation_config, get_federation
from coordinator.rounds import store, uploads, views
from coordinator.rounds.machine import Stage
from coordinator.rounds.participant_metrics import record_metrics

__all__ = ["enroll_router", "router"]

PROBLEM: dict[str, Any] = {"content": {"application/problem+json": {}}}
UPLOAD_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "`invalid_token`", **PROBLEM},
    409: {
        "description": "`wrong_round`, `wrong_stage`, `participant_dropped`, `not_expected` "
        "or `conflicting_upload`",
        **PROBLEM,
    },
    413: {"description": "`payload_too_large`", **PROBLEM},
    422: {
        "description": "`malformed_base64`, `bad_payload` (with `reason`), `bad_envelope`, "
        "`unknown_recipient`, `missing_recipient`, `duplicate_envelope`, `invalid_request`",
        **PROBLEM,
    },
}

enroll_router = APIRouter(prefix="/v1", tags=["participants"])
router = APIRouter(prefix="/v1/participants", tags=["participants"], responses=UPLOAD_ERRORS)


@enroll_router.post(
    "/enroll",
    status_code=status.HTTP_201_CREATED,
    responses={
        401: {"description": "`invalid_token` or `token_expired`", **PROBLEM},
        409: {"description": "`token_used` or `federation_full`", **PROBLEM},
    },
)
def enroll(session: SessionDep, now: Now, request: EnrollRequest) -> EnrollResponse:
    """Redeem a one-time enrollment token: register a display name and X25519 public key,
    get the participant id, its fixed LCC index and its API token (shown only now)."""
    result = enroll_participant(
        session,
        token=request.enrollment_token,
        display_name=request.display_name,
        public_key=request.public_key,
        now=now,
    )
    p = result.participant
    return EnrollResponse(
        participant_id=p.id,
        federation_id=p.federation_id,
        index=p.lcc_index,
        api_token=result.api_token,
    )


def _config(session: SessionDep, participant: Participant) -> FederationConfig:
    return federation_config(get_federation(session, participant.federation_id))


def _drive(session: SessionDep, driver: DriverDep, participant: Participant) -> None:
    rnd = store.current_round(session, participant.federation_id)
    if rnd is not None:
        driver.drive(rnd.id)
    session.expire_all()


def synced_participant(
    session: SessionDep, driver: DriverDep, participant: CurrentParticipant
) -> Participant:
    """The caller, after every transition due on its federation's round was made."""
    _drive(session, driver, participant)
    return participant


Synced = Annotated[Participant, Depends(synced_participant)]


@router.get("/me")
def me(session: SessionDep, participant: CurrentParticipant) -> ParticipantOut:
    return ParticipantOut(
        participant_id=participant.id,
        federation_id=participant.federation_id,
        index=participant.lcc_index,
        display_name=participant.display_name,
        config=_config(session, participant),
    )


@router.get("/me/task")
def task(session: SessionDep, participant: Synced) -> Task:
    """What to do now: ``share`` (with the envelope sizes), ``compute_distances`` (with
    the reference sets), ``compute_sums`` (with the member sets), ``fetch_outcome``,
    ``wait`` or ``dropped``; plus the cluster's global prompt and the peers' keys."""
    return views.task(session, participant, _config(session, participant))


@router.post("/me/rounds/{number}/shares")
def upload_shares(
    session: SessionDep,
    driver: DriverDep,
    metrics: MetricsDep,
    now: Now,
    participant: Synced,
    number: int,
    upload: ShareUpload,
) -> UploadReceipt:
    """All of this participant's sealed shares for the round, in one request: for every
    recipient (itself included) one envelope per kind the task lists."""
    receipt = uploads.accept_shares(
        session, participant, _config(session, participant), number, upload.envelopes, now
    )
    if not receipt.replayed:
        metrics.inc("secfpp_uploads_total", kind="shares")
    _drive(session, driver, participant)
    return receipt


@router.get("/{participant_id}/rounds/{number}/inbox")
def inbox(session: SessionDep, participant: Synced, participant_id: str, number: int) -> Inbox:
    """The envelopes addressed to the caller (``participant_id`` is ``me`` or its own id),
    from every participant whose shares were delivered; available once sharing closed."""
    if participant_id not in ("me", participant.id):
        raise ProblemError("not_your_inbox", "a participant may read only its own inbox")
    rnd = uploads.open_round(session, participant, number)
    return views.inbox(session, rnd, participant.lcc_index)


RESULT_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": ResultUpload.model_json_schema()},
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}


async def result_payload(request: Request) -> bytes:
    """The packed result, from raw ``application/octet-stream`` or JSON with base64."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()
    if kind == "application/octet-stream":
        return body
    if kind in ("application/json", ""):
        try:
            return ResultUpload.model_validate(json.loads(body)).payload
        except json.JSONDecodeError as err:
            raise ProblemError("invalid_request", f"body is not JSON: {err}") from None
        except ValidationError as err:
            codes = {e["type"] for e in err.errors()}
            code = "malformed_base64" if "malformed_base64" in codes else "invalid_request"
            raise ProblemError(code, str(err.errors()[0]["msg"])) from None
    raise ProblemError("unsupported_media_type", f"content type {kind!r} is not accepted")


@router.post("/me/rounds/{number}/results/{stage}", openapi_extra=RESULT_BODY)
def upload_result(
    session: SessionDep,
    driver: DriverDep,
    metrics: MetricsDep,
    now: Now,
    participant: Synced,
    number: int,
    stage: Stage,
    payload: Annotated[bytes, Depends(result_payload)],
) -> UploadReceipt:
    """A coded result: for ``distances`` the packed vector of SecPC values (length in the
    task), for ``aggregation`` the packed matrix of member-set sums (shape in the task)."""
    if stage not in (Stage.DISTANCES, Stage.AGGREGATION):
        raise ProblemError("wrong_stage", f"stage {stage.value} takes no coded results")
    receipt = uploads.accept_result(
        session, participant, _config(session, participant), number, stage, payload, now
    )
    if not receipt.replayed:
        metrics.inc("secfpp_uploads_total", kind=stage.value)
    _drive(session, driver, participant)
    return receipt


@router.post("/me/rounds/{number}/refusals")
def refuse(
    session: SessionDep,
    driver: DriverDep,
    now: Now,
    participant: Synced,
    number: int,
    refusal: RefusalIn,
) -> UploadReceipt:
    """Report that this participant refuses the current stage's request (DESIGN.md
    section 6); it is marked dropped for the rest of the round."""
    receipt = uploads.record_refusal(
        session, participant, number, refusal.reason, refusal.message, now
    )
    _drive(session, driver, participant)
    return receipt


@router.get("/me/rounds/{number}/outcome")
def outcome(session: SessionDep, participant: Synced, number: int) -> RoundOutcome:
    """After publication: the caller's cluster for the next round and its global prompt."""
    from coordinator.rounds.service import get_round

    rnd = get_round(session, participant.federation_id, number)
    return views.outcome(session, rnd, participant, _config(session, participant))


@router.post(
    "/me/rounds/{number}/metrics",
    responses={
        404: {"description": "`round_not_found`", **PROBLEM},
        409: {"description": "`conflicting_upload` (with `names`)", **PROBLEM},
        422: {
            "description": "`invalid_request`: not an object of 1 to 16 entries, a name not "
            "matching `^[a-z][a-z0-9_]{0,39}$`, a value not a finite number",
            **PROBLEM,
        },
    },
)
def report_metrics(
    session: SessionDep,
    metrics: MetricsDep,
    now: Now,
    participant: CurrentParticipant,
    number: int,
    upload: MetricsUpload,
) -> MetricsReceipt:
    """Numbers this participant measured about round ``number`` of its federation (e.g.
    ``{"accuracy": 0.81}`` of the published prompt on its held-out data), in any stage.
    Idempotent per name: the same value again is ``replayed``; another value for a
    stored name is ``conflicting_upload`` and nothing is stored."""
    receipt = record_metrics(session, participant, number, upload.root, now)
    if not receipt.replayed:
        metrics.inc("secfpp_uploads_total", kind="metrics")
    return receipt
