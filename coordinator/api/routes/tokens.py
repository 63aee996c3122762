"""Token lifecycle routes (admin only): participants' tokens, enrollment tokens, admin tokens.

* ``/v1/federations/{id}/participant-tokens``: list; ``.../participants/{pid}/token``:
  rotate; ``.../participants/{pid}/revoke``: revoke the participant;
* ``/v1/federations/{id}/enrollment-tokens``: list (paged), revoke one, revoke every
  unused one;
* ``/v1/admin/tokens``: list, create, revoke named admin tokens.

Every route needs an admin token; a participant's token is answered 401 like any other
wrong token. No answer contains a token's digest; a token appears only in the answer
that created it.
"""

from __future__ import annotations

import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query, status

from secfpp.coordinator.api.body import GuardedRoute
from secfpp.coordinator.api.deps import AdminDep, Now, SessionDep, SettingsDep, require_admin
from secfpp.coordinator.api.openapi import problems
from secfpp.coordinator.api.params import (
    ID_PATTERN,
    Cursor,
    FederationId,
    PageLimit,
    int_cursor,
    read_int_cursor,
)
from secfpp.coordinator.api.schemas.tokens import (
    AdminTokenCreate,
    AdminTokenIssued,
    AdminTokenOut,
    EnrollmentTokenOut,
    EnrollmentTokenPage,
    ParticipantTokenIssued,
    ParticipantTokenOut,
    RevokedEnrollmentTokens,
)
from secfpp.coordinator.auth.admin_tokens import (
    NAME_PATTERN,
    SETTINGS_TOKEN_NAME,
    create_admin_token,
    list_admin_tokens,
    revoke_admin_token,
)
from secfpp.coordinator.auth.participant_tokens import (
    EnrollmentState,
    enrollment_state,
    list_enrollment_tokens,
    participants_of,
    revoke_enrollment_token,
    revoke_participant,
    revoke_unused_enrollment_tokens,
    rotate_participant_token,
)
from secfpp.coordinator.db.models import AdminToken, EnrollmentToken, Participant
from secfpp.coordinator.federations.service import get_federation
from secfpp.wire import limits

__all__ = ["router"]

log = logging.getLogger(__name__)

router = APIRouter(
    tags=["tokens"],
    route_class=GuardedRoute,
    dependencies=[Depends(require_admin)],
    responses=problems("invalid_token", "rate_limited"),
)

ParticipantId = Annotated[
    str,
    Path(
        pattern=ID_PATTERN,
        description="The participant's id (from enrollment).",
        examples=["0d4f6c1a-2b3e-4f5a-8c9d-7e6f5a4b3c2d"],
    ),
]
# The route's path says ``{token_id:int}``: only digits reach it, so its literal sibling
# ``.../enrollment-tokens/revoke-unused`` is not also taken by it (that path's ``Allow``
# lists only its own methods, and ``DELETE .../revoke-unused`` is 405, not 422).
TokenId = Annotated[
    int,
    Path(
        ge=1,
        le=limits.INT32_MAX,
        description="An enrollment token's id (given at issue).",
        examples=[1],
    ),
]


def _participant_out(p: Participant) -> ParticipantTokenOut:
    return ParticipantTokenOut(
        participant_id=p.id,
        index=p.lcc_index,
        display_name=p.display_name,
        enrolled_at=p.enrolled_at,
        token_issued_at=p.token_rotated_at or p.enrolled_at,
        token_last_used_at=p.token_last_used_at,
        state="active" if p.revoked_at is None else "revoked",
        revoked_at=p.revoked_at,
    )


def _enrollment_out(row: EnrollmentToken, now: Now) -> EnrollmentTokenOut:
    return EnrollmentTokenOut(
        id=row.id,
        created_at=row.created_at,
        expires_at=row.expires_at,
        state=enrollment_state(row, now),
        used_at=row.used_at,
        participant_id=row.participant_id,
        revoked_at=row.revoked_at,
    )


def _admin_out(row: AdminToken) -> AdminTokenOut:
    return AdminTokenOut(
        name=row.name,
        source="api",
        created_at=row.created_at,
        last_used_at=row.last_used_at,
        state="active" if row.revoked_at is None else "revoked",
        revoked_at=row.revoked_at,
    )


# -- participants ---------------------------------------------------------------------------


@router.get(
    "/v1/federations/{federation_id}/participant-tokens",
    summary="List the participants' API tokens (states, never the tokens)",
    responses=problems("federation_not_found"),
)
def participant_tokens(
    session: SessionDep, federation_id: FederationId
) -> list[ParticipantTokenOut]:
    """Every participant ever enrolled in the federation (at most its `n_participants`),
    by LCC index, with when its token was issued and last used and whether it was
    revoked."""
    get_federation(session, federation_id)
    return [_participant_out(p) for p in participants_of(session, federation_id)]


@router.post(
    "/v1/federations/{federation_id}/participants/{participant_id}/token",
    status_code=status.HTTP_201_CREATED,
    summary="Rotate a participant's API token (the new token is shown once)",
    responses=problems("federation_not_found", "participant_not_found", "participant_revoked"),
)
def rotate(
    session: SessionDep,
    admin: AdminDep,
    now: Now,
    federation_id: FederationId,
    participant_id: ParticipantId,
) -> ParticipantTokenIssued:
    """Issue a new API token for the participant; the old token gets 401 from now on.
    Give the new token to the participant's operator, who installs it with
    `secfpp-participant set-token` (token file or `SECFPP_API_TOKEN`). The participant
    keeps its index, its key and its place in the running round."""
    get_federation(session, federation_id)
    participant, token = rotate_participant_token(session, federation_id, participant_id, now)
    log.info("admin %r rotated the token of participant %s", admin.name, participant.id)
    return ParticipantTokenIssued(
        participant_id=participant.id,
        index=participant.lcc_index,
        api_token=token,
        issued_at=now,
    )


@router.post(
    "/v1/federations/{federation_id}/participants/{participant_id}/revoke",
    summary="Revoke a participant: its token stops working, it joins no new round",
    responses=problems("federation_not_found", "participant_not_found"),
)
def revoke(
    session: SessionDep,
    admin: AdminDep,
    now: Now,
    federation_id: FederationId,
    participant_id: ParticipantId,
) -> ParticipantTokenOut:
    """Revoke the participant at once and for good (idempotent). Its token gets 401 from
    now on; rounds started later leave it out (its LCC index stays reserved, so the
    federation runs with one participant fewer, like a permanent dropout); a round
    already running drops it at the stage deadline. Its past rounds, uploads and metrics
    stay as they are."""
    get_federation(session, federation_id)
    participant = revoke_participant(session, federation_id, participant_id, now)
    log.info("admin %r revoked participant %s", admin.name, participant.id)
    return _participant_out(participant)


# -- enrollment tokens ----------------------------------------------------------------------


@router.get(
    "/v1/federations/{federation_id}/enrollment-tokens",
    summary="List enrollment tokens with their states (never the tokens)",
    responses=problems("federation_not_found"),
)
def enrollment_tokens(
    session: SessionDep,
    now: Now,
    federation_id: FederationId,
    state: Annotated[
        EnrollmentState | None, Query(description="Only tokens in this state.")
    ] = None,
    limit: PageLimit = limits.PAGE_LIMIT_DEFAULT,
    cursor: Cursor = None,
) -> EnrollmentTokenPage:
    """The federation's enrollment tokens in issue order (by id), a page at a time: id,
    creation, expiry, state (`unused`, `used`, `expired`, `revoked`), who redeemed it and
    when. ``next_cursor`` is null on the last page."""
    get_federation(session, federation_id)
    after = None if cursor is None else read_int_cursor(cursor)
    rows = list_enrollment_tokens(
        session, federation_id, now, state=state, after=after, limit=limit + 1
    )
    page = rows[:limit]
    return EnrollmentTokenPage(
        items=[_enrollment_out(r, now) for r in page],
        next_cursor=int_cursor(page[-1].id) if len(rows) > limit else None,
    )


@router.delete(
    "/v1/federations/{federation_id}/enrollment-tokens/{token_id:int}",
    summary="Revoke one enrollment token that was not redeemed",
    responses=problems("federation_not_found", "token_not_found", "token_used"),
)
def revoke_enrollment(
    session: SessionDep,
    admin: AdminDep,
    now: Now,
    federation_id: FederationId,
    token_id: TokenId,
) -> EnrollmentTokenOut:
    """Revoke the enrollment token (idempotent): enrolling with it gets 401
    `token_revoked` from now on."""
    get_federation(session, federation_id)
    row = revoke_enrollment_token(session, federation_id, token_id, now)
    log.info("admin %r revoked enrollment token %d", admin.name, token_id)
    return _enrollment_out(row, now)


@router.post(
    "/v1/federations/{federation_id}/enrollment-tokens/revoke-unused",
    summary="Revoke every unused enrollment token of the federation",
    responses=problems("federation_not_found"),
)
def revoke_unused(
    session: SessionDep, admin: AdminDep, now: Now, federation_id: FederationId
) -> RevokedEnrollmentTokens:
    """Revoke every enrollment token that is neither redeemed, expired nor revoked, e.g.
    once every participant has enrolled or when a batch of tokens leaked."""
    get_federation(session, federation_id)
    revoked = revoke_unused_enrollment_tokens(session, federation_id, now)
    log.info("admin %r revoked %d unused enrollment tokens", admin.name, len(revoked))
    return RevokedEnrollmentTokens(revoked=revoked)


# -- admin tokens ---------------------------------------------------------------------------


@router.get(
    "/v1/admin/tokens",
    summary="List the admin credentials (names and states, never the tokens)",
)
def admin_tokens(session: SessionDep, settings: SettingsDep) -> list[AdminTokenOut]:
    """The settings' token (named `settings`, if set) and every named admin token,
    active or revoked, in creation order."""
    out = [_admin_out(row) for row in list_admin_tokens(session)]
    if settings.admin_token.get_secret_value():
        settings_token = AdminTokenOut(
            name=SETTINGS_TOKEN_NAME,
            source="settings",
            created_at=None,
            last_used_at=None,
            state="active",
            revoked_at=None,
        )
        out.insert(0, settings_token)
    return out


@router.post(
    "/v1/admin/tokens",
    status_code=status.HTTP_201_CREATED,
    summary="Create a named admin token (shown once)",
    responses=problems("token_name_taken"),
)
def create_admin(
    session: SessionDep, admin: AdminDep, now: Now, request: AdminTokenCreate
) -> AdminTokenIssued:
    """A new admin bearer token, valid at once in every coordinator process on this
    database. To rotate the admin credential: create a new token, move the clients to
    it, revoke the old one."""
    row, token = create_admin_token(session, request.name, now)
    log.info("admin %r created admin token %r", admin.name, row.name)
    return AdminTokenIssued(name=row.name, token=token, created_at=row.created_at)


@router.delete(
    "/v1/admin/tokens/{name}",
    summary="Revoke a named admin token",
    responses=problems("token_not_found", "token_in_settings", "last_admin_token"),
)
def revoke_admin(
    session: SessionDep,
    settings: SettingsDep,
    admin: AdminDep,
    now: Now,
    name: Annotated[
        str, Path(pattern=NAME_PATTERN, description="The admin token's name.", examples=["ci"])
    ],
) -> AdminTokenOut:
    """Revoke the admin token (idempotent): it gets 401 from now on, in every process.
    An admin may revoke its own token as long as another credential remains."""
    row = revoke_admin_token(
        session, name, now, settings_token_set=bool(settings.admin_token.get_secret_value())
    )
    log.info("admin %r revoked admin token %r", admin.name, row.name)
    return _admin_out(row)
