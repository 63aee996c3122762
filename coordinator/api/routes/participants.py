"""Participant routes: enroll, task, shares, inbox, attestations, coded results,
refusals, outcome, metrics.

Every route but ``/v1/enroll`` needs the participant's bearer token. Each first lets
the driver make any transition that is due (so deadlines are enforced even when the
background task is behind), then does its work, then drives again (an upload may
complete a stage).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Header, Request, Response, status
from fastapi.security import HTTPAuthorizationCredentials
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from secfpp.coordinator.api.binary import (
    BINARY_SCHEMA,
    OCTETS,
    SHARES_BODY,
    share_envelopes,
    wants_binary,
)
from secfpp.coordinator.api.body import GuardedRoute, reads_body
from secfpp.coordinator.api.deps import (
    CurrentParticipant,
    DriverDep,
    MetricsDep,
    Now,
    ParticipantCredentials,
    SessionDep,
    SettingsDep,
    current_participant,
    limit_enrollment,
    release,
)
from secfpp.coordinator.api.openapi import problems
from secfpp.coordinator.api.params import ParticipantRef, RoundNumber
from secfpp.coordinator.api.schemas.federations import ParticipantOut
from secfpp.coordinator.db.models import Participant, Round
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.federations.service import enroll as enroll_participant
from secfpp.coordinator.rounds import attestations, contributions, refusals, uploads, views
from secfpp.coordinator.rounds.driver import RoundDriver
from secfpp.coordinator.rounds.machine import TERMINAL, Stage
from secfpp.coordinator.rounds.participant_metrics import record_metrics
from secfpp.coordinator.settings import Settings
from secfpp.crypto.wire import pack_inbox
from secfpp.federation import FederationConfig
from secfpp.wire.messages import (
    AttestationIn,
    AttestationReceipt,
    Attestations,
    BeaconContributionIn,
    BeaconContributionReceipt,
    EnrollRequest,
    EnrollResponse,
    Inbox,
    MetricsReceipt,
    MetricsUpload,
    RefusalIn,
    ResultUpload,
    RoundOutcome,
    Task,
    UploadReceipt,
)
from secfpp.wire.types import b64

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
    429: {
        "description": "`rate_limited`: too many authentication failures from this address "
        "(see `Retry-After`)",
        **PROBLEM,
    },
    422: {
        "description": "`malformed_base64`, `bad_payload` (with `reason`; a binary body that "
        "is not a well-formed batch of crypto.wire), `bad_envelope`, "
        "`unknown_recipient`, `missing_recipient`, `duplicate_envelope`, `invalid_request`",
        **PROBLEM,
    },
}

enroll_router = APIRouter(prefix="/v1", tags=["participants"], route_class=GuardedRoute)
router = APIRouter(
    prefix="/v1/participants",
    tags=["participants"],
    responses=UPLOAD_ERRORS,
    route_class=GuardedRoute,
)


@enroll_router.post(
    "/enroll",
    status_code=status.HTTP_201_CREATED,
    summary="Enroll with a one-time token: get an index and a participant API token",
    dependencies=[Depends(limit_enrollment)],
    responses={
        401: {"description": "`invalid_token`, `token_expired` or `token_revoked`", **PROBLEM},
        409: {
            "description": "`token_used`, `public_key_taken` or `federation_full`",
            **PROBLEM,
        },
        429: {
            "description": "`rate_limited`: too many enrollment attempts from this address "
            "(see `Retry-After`)",
            **PROBLEM,
        },
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


def _config(session: SessionDep, driver: DriverDep, participant: Participant) -> FederationConfig:
    """The participant's federation config (parsed once per process, by the driver)."""
    return driver.federation_config(session, participant.federation_id)


def _drive(
    session: SessionDep, driver: DriverDep, settings: SettingsDep, participant: Participant
) -> None:
    """Make the transitions due on the participant's round, on the request's own session
    (the driver ends its transaction first: a request never holds two connections).

    A round whose last pass decided to wait at its current version, before its
    deadline, needs no pass (:meth:`~coordinator.rounds.driver.RoundDriver.settled`).
    """
    federation_id = participant.federation_id
    current = session.execute(
        select(Round.id, Round.stage, Round.version)
        .where(Round.federation_id == federation_id)
        .order_by(Round.number.desc())
        .limit(1)
    ).first()
    if (
        current is not None
        and Stage(current.stage) not in TERMINAL
        and not driver.settled(current.id, current.version)
    ):
        driver.drive(current.id, session=session, wait_s=settings.drive_wait_s)
        session.expire_all()


def _synced(
    request: Request,
    session: Session,
    driver: RoundDriver,
    settings: Settings,
    now: datetime,
    credentials: HTTPAuthorizationCredentials | None,
) -> Participant:
    participant = current_participant(request, session, now, credentials)
    _drive(session, driver, settings, participant)
    return participant


def synced_participant(
    request: Request,
    session: SessionDep,
    driver: DriverDep,
    settings: SettingsDep,
    now: Now,
    credentials: ParticipantCredentials,
) -> Participant:
    """The caller (authenticated as :func:`~coordinator.api.deps.current_participant`
    does), after every transition due on its federation's round was made; one
    dependency, so one worker-thread hand-off, and the connection is released before
    the route waits for its own thread (:func:`~coordinator.api.deps.release`)."""
    participant = _synced(request, session, driver, settings, now, credentials)
    release(session, participant)
    return participant


Synced = Annotated[Participant, Depends(synced_participant)]


@router.get("/me", summary="Read who the token belongs to and the federation config")
def me(session: SessionDep, driver: DriverDep, participant: CurrentParticipant) -> ParticipantOut:
    """Who the token belongs to: ids, LCC index, registered public key, federation config
    (the daemon checks its state directory against it at start)."""
    return ParticipantOut(
        participant_id=participant.id,
        federation_id=participant.federation_id,
        index=participant.lcc_index,
        display_name=participant.display_name,
        public_key=b64(participant.public_key),
        config=_config(session, driver, participant),
    )


@router.get("/me/task", summary="Read what to do now in the current round")
def task(
    request: Request,
    session: SessionDep,
    driver: DriverDep,
    settings: SettingsDep,
    now: Now,
    credentials: ParticipantCredentials,
) -> Task:
    """What to do now: ``share`` (with the envelope sizes), ``compute_distances`` (with
    the reference sets), ``compute_sums`` (with the member sets), ``fetch_outcome``,
    ``wait`` or ``dropped``; the peers' keys when the action needs them (share and
    compute; empty while waiting); and, while it has to share (train), its cluster's
    global prompt."""
    # The most frequent request (every participant polls it): authentication, the
    # driver's check and the view run in one worker thread (it has no parameters, so
    # authenticating here still answers 401 before anything else is looked at).
    participant = _synced(request, session, driver, settings, now, credentials)
    config = _config(session, driver, participant)
    doc = views.task(session, participant, config, now=now, outcome_rate=settings.outcome_rate)
    doc.federation = views.federation_status(session, participant.federation_id)
    session.rollback()  # release the connection in this thread (deps.get_session)
    d = config.deadlines
    doc.poll_after_s = views.poll_after(
        doc,
        config.n_participants,
        settings.task_poll_rate,
        min(d.sharing_s, d.distances_s, d.aggregation_s),
    )
    return doc


@router.post(
    "/me/rounds/{number}/shares",
    summary="Upload every sealed share for the round",
    openapi_extra=SHARES_BODY,
)
def upload_shares(
    session: SessionDep,
    driver: DriverDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    now: Now,
    participant: Synced,
    number: RoundNumber,
    envelopes: Annotated[list[uploads.SealedEnvelope], Depends(share_envelopes)],
) -> UploadReceipt:
    """All of this participant's sealed shares for the round, in one request: for every
    recipient (itself included) one envelope per kind the task lists; as JSON (base64
    ciphertexts) or, about 25 % smaller and cheaper to read, as one binary batch
    (``application/octet-stream``). Either form of the same envelopes is a replay."""
    receipt = uploads.accept_shares(
        session, participant, _config(session, driver, participant), number, envelopes, now
    )
    if not receipt.replayed:
        metrics.inc("secfpp_uploads_total", kind="shares")
    _drive(session, driver, settings, participant)
    session.rollback()  # release the connection in this thread (deps.get_session)
    return receipt


@router.get(
    "/{participant_id}/rounds/{number}/inbox",
    summary="Download the sealed shares addressed to the caller",
    response_model=Inbox,
    responses={
        **problems("not_your_inbox", "wrong_round"),
        200: {
            "description": "The inbox: JSON, or with `Accept: application/octet-stream` one "
            "binary inbox (crypto.wire.pack_inbox: b'SFI', version 1, uint32 sender count, "
            "uint64 round, uint32 recipient, 4 zero bytes, the senders as uint32, then the "
            "envelopes as a crypto.wire.pack_envelopes batch whose peers are the senders).",
            "content": {OCTETS: {"schema": BINARY_SCHEMA}},
        },
    },
)
def inbox(
    request: Request,
    session: SessionDep,
    participant: Synced,
    participant_id: ParticipantRef,
    number: RoundNumber,
) -> Any:
    """The envelopes addressed to the caller (``participant_id`` is ``me`` or its own id),
    from every participant whose shares were delivered; available once sharing closed.
    JSON by default; a binary inbox when ``Accept`` prefers ``application/octet-stream``."""
    if participant_id not in ("me", participant.id):
        raise ProblemError("not_your_inbox", "a participant may read only its own inbox")
    rnd = uploads.open_round(session, participant, number)
    if not wants_binary(request.headers.get("accept")):
        doc = views.inbox(session, rnd, participant.lcc_index)
        session.rollback()  # release the connection in this thread (deps.get_session)
        return doc
    senders, records = views.inbox_records(session, rnd, participant.lcc_index)
    round_number, recipient = rnd.number, participant.lcc_index
    session.rollback()
    content = pack_inbox(round_number, recipient, senders, records)
    return Response(content, media_type=OCTETS, headers={"Vary": "Accept"})


RESULT_BODY = {
    "requestBody": {
        "required": True,
        "content": {
            "application/json": {"schema": ResultUpload.model_json_schema()},
            "application/octet-stream": {"schema": {"type": "string", "format": "binary"}},
        },
    }
}


@reads_body
async def result_payload(request: Request) -> bytes:
    """The packed result, from raw ``application/octet-stream`` or JSON with base64."""
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    body = await request.body()
    if kind == "application/octet-stream":
        return body
    if kind in ("application/json", ""):
        try:
            return ResultUpload.model_validate(await request.json()).payload
        except json.JSONDecodeError as err:
            raise ProblemError("invalid_request", f"body is not JSON: {err}") from None
        except ValidationError as err:
            codes = {e["type"] for e in err.errors()}
            code = "malformed_base64" if "malformed_base64" in codes else "invalid_request"
            raise ProblemError(code, str(err.errors()[0]["msg"])) from None
    raise ProblemError("unsupported_media_type", f"content type {kind!r} is not accepted")


@router.post(
    "/me/rounds/{number}/results/{stage}",
    summary="Upload a coded result (distances or cluster sums) computed on shares",
    openapi_extra=RESULT_BODY,
)
def upload_result(
    session: SessionDep,
    driver: DriverDep,
    settings: SettingsDep,
    metrics: MetricsDep,
    now: Now,
    participant: Synced,
    number: RoundNumber,
    stage: Stage,
    payload: Annotated[bytes, Depends(result_payload)],
    request_digest: Annotated[
        str | None,
        Header(
            alias="X-Request-Digest",
            max_length=64,
            description="SHA-256 (hex) of the request answered (crypto.refusal "
            "distance_request_digest / aggregation_request_digest); a result for another "
            "request than the stage holds is refused with `request_mismatch`.",
        ),
    ] = None,
) -> UploadReceipt:
    """A coded result: for ``distances`` the packed vector of SecPC values (length in the
    task), for ``aggregation`` the packed matrix of member-set sums (shape in the task),
    with the digest of the request it answers in ``X-Request-Digest``."""
    if stage not in (Stage.DISTANCES, Stage.AGGREGATION):
        raise ProblemError("wrong_stage", f"stage {stage.value} takes no coded results")
    receipt = uploads.accept_result(
        session,
        participant,
        _config(session, driver, participant),
        number,
        stage,
        payload,
        now,
        request_digest,
    )
    if not receipt.replayed:
        metrics.inc("secfpp_uploads_total", kind=stage.value)
    _drive(session, driver, settings, participant)
    session.rollback()  # release the connection in this thread (deps.get_session)
    return receipt


@router.post(
    "/me/rounds/{number}/refusals", summary="Refuse the current stage's request, with a reason"
)
def refuse(
    session: SessionDep,
    driver: DriverDep,
    settings: SettingsDep,
    now: Now,
    participant: Synced,
    number: RoundNumber,
    refusal: RefusalIn,
) -> UploadReceipt:
    """Report that this participant refuses the current stage's request (DESIGN.md
    section 6). Blaming nobody, it is marked dropped for the rest of the round; blaming
    ``senders`` whose shares failed authentication, it stays, and a sender blamed by
    enough peers is dropped and the request planned again without it."""
    receipt = refusals.record_refusal(
        session,
        participant,
        _config(session, driver, participant),
        number,
        refusal.reason,
        refusal.message,
        refusal.senders,
        now,
    )
    _drive(session, driver, settings, participant)
    session.rollback()  # release the connection in this thread (deps.get_session)
    return receipt


CodedStage = Literal["distances", "aggregation"]


@router.post(
    "/me/rounds/{number}/attestations",
    summary="Attest the request digest of a coded stage to the other stage participants",
    responses={
        409: {
            "description": "`wrong_round`, `wrong_stage`, `participant_dropped`, "
            "`not_expected` (not a computer of the stage: committee members only) or "
            "`conflicting_upload` (another digest or other MACs for this round and stage)",
            **PROBLEM,
        },
        422: {
            "description": "`invalid_request` (a malformed digest or MAC, a recipient twice), "
            "`malformed_base64`, `unknown_recipient` (not another participant of the stage)",
            **PROBLEM,
        },
    },
)
def attest(
    session: SessionDep,
    now: Now,
    participant: Synced,
    number: RoundNumber,
    body: AttestationIn,
) -> AttestationReceipt:
    """Before answering a coded stage's request, a participant attests its digest once per
    round and stage, with one MAC per other stage participant under their pair key
    (crypto.attestation); each answers only when it holds a quorum of valid attestations
    of its own digest (docs/protocol.md section 7, "Equivocation"). The same attestation
    again is ``replayed``."""
    return attestations.accept(
        session, participant, number, Stage(body.stage), body.digest, body.macs, now
    )


@router.get(
    "/me/rounds/{number}/attestations/{stage}",
    summary="Read the attestations of a coded stage's request addressed to the caller",
)
def read_attestations(
    session: SessionDep,
    driver: DriverDep,
    settings: SettingsDep,
    now: Now,
    participant: Synced,
    number: RoundNumber,
    stage: CodedStage,
) -> Attestations:
    """Every attestation addressed to the caller for the round's current coded stage (its
    MACs, by sender), how long to wait before asking again, and how long the stage has
    left."""
    config = _config(session, driver, participant)
    d = config.deadlines
    wait = views.waiting_poll_after(  # only the stage's P participants poll this
        config.crypto.committee_size or config.n_participants,
        settings.task_poll_rate,
        min(d.sharing_s, d.distances_s, d.aggregation_s),
    )
    return attestations.addressed_to(session, participant, number, Stage(stage), wait, now)


@router.get(
    "/me/rounds/{number}/outcome",
    summary="Read the caller's next cluster and its new global prompt",
    responses=problems("round_not_found"),
)
def outcome(
    session: SessionDep, driver: DriverDep, participant: Synced, number: RoundNumber
) -> RoundOutcome:
    """After publication: the caller's cluster for the next round and its global prompt."""
    from secfpp.coordinator.rounds.service import get_round

    rnd = get_round(session, participant.federation_id, number)
    doc = views.outcome(session, rnd, participant, _config(session, driver, participant))
    session.rollback()  # release the connection in this thread (deps.get_session)
    return doc


@router.post(
    "/me/rounds/{number}/metrics",
    summary="Report metrics measured about a round (e.g. held-out accuracy)",
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
    number: RoundNumber,
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


@router.post(
    "/me/rounds/{number}/beacon-contribution",
    summary="Commit to, or reveal, a contribution to a committee round's beacon",
    responses={
        409: {
            "description": "`wrong_round` (outside the window), `not_expected` (no committee, "
            "or no commitment to reveal), `conflicting_upload` (another commitment or value)",
            **PROBLEM,
        },
        422: {
            "description": "`invalid_request` (not exactly one 64-hex-digit field), "
            "`reveal_does_not_open` (recorded: the contribution is left out of the draw)",
            **PROBLEM,
        },
    },
)
def beacon_contribution(
    session: SessionDep,
    driver: DriverDep,
    now: Now,
    participant: CurrentParticipant,
    number: RoundNumber,
    body: BeaconContributionIn,
) -> BeaconContributionReceipt:
    """A contribution to round ``number``'s committee beacon (docs/protocol.md section
    11): its ``commitment`` while round ``number - 2`` is the federation's newest round
    (before the first round for round 2), its ``value`` while round ``number - 1`` is.
    The same upload again is ``replayed``."""
    kind: Literal["commitment", "value"] = "commitment" if body.value is None else "value"
    hexed = body.commitment if body.value is None else body.value
    assert hexed is not None
    replayed = contributions.accept(
        session,
        participant,
        _config(session, driver, participant),
        number,
        kind,
        bytes.fromhex(hexed),
        now,
    )
    session.rollback()  # release the connection in this thread (deps.get_session)
    return BeaconContributionReceipt(
        round=number, participant_index=participant.lcc_index, kind=kind, replayed=replayed
    )
