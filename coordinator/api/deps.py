"""Dependencies of the routes, as ``Annotated`` aliases.

The engine, session factory, driver, clock, metrics, settings and the per-address rate
limiters (:class:`~coordinator.auth.ratelimit.ClientLimits`) live on ``app.state``.

Cost per request: FastAPI runs every synchronous dependency in a worker thread of its
own (a thread hand-off each), so the dependencies that only read ``app.state`` are
``async`` (they run on the event loop, no hand-off), the session is opened on the
event loop (no connection is taken before the first statement) and closed in a worker
thread only when it still holds a connection (the participant routes end their
transaction in their own thread), and settings are read from ``app.state``
rather than through a dependency override (FastAPI re-analyses an overridden
dependency's signature on every use).

Bodies: every authenticating dependency here is also the route's body gate
(:func:`~coordinator.api.body.register_gate`): a route that takes a body checks the
caller's credential (:func:`admin_gate`, :func:`participant_gate`, or for enrollment
:func:`enrollment_gate`) before reading it, in its own worker-thread hop and session;
the dependency checks it again when the route runs (one more indexed lookup per upload).

Connections: a request holds a pooled connection only within one worker-thread hop.
A dependency that reads the database ends its transaction before it returns
(:func:`release`), because between two hops a request waits for a free worker thread,
and a connection held while waiting starves the pool (with 8 threads and 64 clients
the 40 connections ran out). So at most ``worker_threads`` connections are in use.
"""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable
from datetime import datetime
from typing import Annotated, TypeVar

import anyio
from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from fastapi.security.utils import get_authorization_scheme_param
from sqlalchemy import inspect
from sqlalchemy.orm import Session

from secfpp.coordinator.api.body import UNAUTHENTICATED_MAX_BODY, BodyGate, register_gate
from secfpp.coordinator.auth.admin_tokens import AdminCredential, authenticate_admin
from secfpp.coordinator.auth.participant_tokens import authenticate_participant
from secfpp.coordinator.auth.ratelimit import ClientLimits, client_key
from secfpp.coordinator.db.models import Participant
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.metrics import Metrics
from secfpp.coordinator.rounds.driver import RoundDriver
from secfpp.coordinator.settings import Settings

__all__ = [
    "AdminCredentials",
    "AdminDep",
    "CurrentParticipant",
    "DriverDep",
    "MetricsDep",
    "Now",
    "ParticipantCredentials",
    "SessionDep",
    "SettingsDep",
    "admin_bearer",
    "admin_gate",
    "authenticated",
    "client_limits",
    "enrollment_gate",
    "in_session",
    "limit_enrollment",
    "participant_gate",
    "release",
    "require_admin",
]

log = logging.getLogger(__name__)
T = TypeVar("T")


async def app_settings(request: Request) -> Settings:
    """The app's settings (``create_app(settings)``; default :func:`get_settings`)."""
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(app_settings)]

# Bearer schemes (None when the header is absent: the token check answers 401, not FastAPI).
admin_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="AdminToken",
    description="An admin credential: the coordinator's settings token (SECFPP_ADMIN_TOKEN) "
    "or a named admin token (`sfa_` + 43 base64url characters) from POST /v1/admin/tokens. "
    "Checked before the request body is read; a missing, wrong or revoked token is 401.",
)
_participant_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="ParticipantToken",
    description="A participant's API token (`sfp_` + 43 base64url characters), returned once "
    "by POST /v1/enroll or by a rotation. Checked before the request body is read; a "
    "missing, wrong or revoked token is 401.",
)


def release(session: Session, *keep: object) -> None:
    """End the session's transaction in this thread (returning its connection to the
    pool); the ORM objects ``keep`` are detached first so that they keep their loaded
    attributes (a rollback would expire them and the next read would reload them)."""
    for obj in keep:
        if inspect(obj).expired_attributes:  # e.g. a driver pass ended the transaction
            session.refresh(obj)
        session.expunge(obj)
    session.rollback()


async def get_session(request: Request) -> AsyncIterator[Session]:
    session: Session = request.app.state.sessions()
    try:
        yield session
    finally:
        if session.in_transaction():  # closing returns a connection: database I/O
            with anyio.CancelScope(shield=True):  # a client that went away still frees it
                await anyio.to_thread.run_sync(session.close)
        else:  # no connection held (routes end their transaction in their own thread)
            session.close()


SessionDep = Annotated[Session, Depends(get_session)]


async def get_driver(request: Request) -> RoundDriver:
    driver: RoundDriver = request.app.state.driver
    return driver


DriverDep = Annotated[RoundDriver, Depends(get_driver)]


async def get_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


MetricsDep = Annotated[Metrics, Depends(get_metrics)]


async def get_now(request: Request) -> datetime:
    now: datetime = request.app.state.clock()
    return now


Now = Annotated[datetime, Depends(get_now)]


def client_limits(request: Request) -> ClientLimits:
    limits: ClientLimits = request.app.state.limits
    return limits


def _rate_limited(wait_s: float, what: str) -> ProblemError:
    seconds = max(1, math.ceil(wait_s))
    return ProblemError(
        "rate_limited",
        f"too many {what} from this client address; retry in {seconds} s",
        headers={"Retry-After": str(seconds)},
        retry_after_s=seconds,
    )


def authenticated(
    request: Request, now: datetime, check: Callable[[str | None], T], token: str | None
) -> T:
    """``check(token)`` behind the per-address limit on authentication failures.

    An address over the limit gets 429 for every request that carries (or lacks) a token,
    valid or not, until its allowance refills: a guess that is never checked cannot
    succeed. Each 401 spends one unit of the allowance.
    """
    limiter = client_limits(request).auth_failures
    key = client_key(request.client.host if request.client else None)
    stamp = now.timestamp()
    wait = limiter.wait_s(key, stamp)
    if wait > 0:
        log.debug("authentication failures limit reached for %s", key)
        raise _rate_limited(wait, "authentication failures")
    try:
        return check(token)
    except ProblemError as err:
        if err.status == 401:
            limiter.hit(key, stamp)
        raise


AdminCredentials = Annotated[HTTPAuthorizationCredentials | None, Depends(admin_bearer)]


def require_admin(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    now: Now,
    credentials: AdminCredentials,
) -> AdminCredential:
    """An admin bearer token: the settings' token or an active named admin token."""
    expected = settings.admin_token.get_secret_value()
    admin = authenticated(
        request,
        now,
        lambda token: authenticate_admin(session, token, expected, now),
        None if credentials is None else credentials.credentials,
    )
    release(session)
    return admin


AdminDep = Annotated[AdminCredential, Depends(require_admin)]


ParticipantCredentials = Annotated[
    HTTPAuthorizationCredentials | None, Depends(_participant_bearer)
]


def current_participant(
    request: Request, session: SessionDep, now: Now, credentials: ParticipantCredentials
) -> Participant:
    """The participant holding the bearer token (the session's transaction stays open:
    for callers in the same worker thread)."""
    return authenticated(
        request,
        now,
        lambda token: authenticate_participant(session, token, now),
        None if credentials is None else credentials.credentials,
    )


def authenticated_participant(
    request: Request, session: SessionDep, now: Now, credentials: ParticipantCredentials
) -> Participant:
    """:func:`current_participant` as a dependency: the connection is released."""
    participant = current_participant(request, session, now, credentials)
    release(session, participant)
    return participant


CurrentParticipant = Annotated[Participant, Depends(authenticated_participant)]


def limit_enrollment(request: Request, now: Now) -> None:
    """Every enrollment attempt spends one unit of the address's enrollment allowance
    (once: a request whose body gate spent it is not counted again)."""
    if request.scope.pop(_ENROLLMENT_COUNTED, False):
        return
    key = client_key(request.client.host if request.client else None)
    wait = client_limits(request).enrollment.hit(key, now.timestamp())
    if wait > 0:
        log.debug("enrollment attempts limit reached for %s", key)
        raise _rate_limited(wait, "enrollment attempts")


# -- body gates: the credential checked before a route reads its body ---------------------

_ENROLLMENT_COUNTED = "secfpp.enrollment_counted"


async def in_session(request: Request, work: Callable[[Session], T]) -> T:
    """``work(session)`` in a worker thread, on a session of its own (closed after)."""

    def run() -> T:
        session: Session = request.app.state.sessions()
        try:
            return work(session)
        finally:
            session.close()

    return await anyio.to_thread.run_sync(run)


def _bearer(request: Request) -> str | None:
    """The bearer token as :data:`admin_bearer` reads it (None when absent)."""
    scheme, token = get_authorization_scheme_param(request.headers.get("Authorization"))
    return token if scheme.lower() == "bearer" and token else None


async def admin_gate(request: Request) -> None:
    """:func:`require_admin`'s check (and failure limit), before the body is read."""
    expected = request.app.state.settings.admin_token.get_secret_value()
    now: datetime = request.app.state.clock()
    token = _bearer(request)
    await in_session(
        request,
        lambda session: authenticated(
            request, now, lambda t: authenticate_admin(session, t, expected, now), token
        ),
    )


async def participant_gate(request: Request) -> None:
    """:func:`current_participant`'s check (and failure limit), before the body is read."""
    now: datetime = request.app.state.clock()
    token = _bearer(request)
    await in_session(
        request,
        lambda session: authenticated(
            request, now, lambda t: authenticate_participant(session, t, now), token
        ),
    )


async def enrollment_gate(request: Request) -> None:
    """``POST /v1/enroll`` has no bearer token (the enrollment token is in its body):
    the attempt is counted against the address's limit before the body is read, and
    the body is at most :data:`~coordinator.api.body.UNAUTHENTICATED_MAX_BODY`."""
    limit_enrollment(request, request.app.state.clock())
    request.scope[_ENROLLMENT_COUNTED] = True


register_gate(admin_bearer, BodyGate(admin_gate))
register_gate(_participant_bearer, BodyGate(participant_gate))
register_gate(limit_enrollment, BodyGate(enrollment_gate, UNAUTHENTICATED_MAX_BODY))
