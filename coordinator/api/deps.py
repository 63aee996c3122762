"""Dependencies of the routes, as ``Annotated`` aliases.

The engine, session factory, driver, clock, metrics, settings and the per-address rate
limiters (:class:`~coordinator.ratelimit.ClientLimits`) live on ``app.state``.

Cost per request: FastAPI runs every synchronous dependency in a worker thread of its
own (a thread hand-off each), so the dependencies that only read ``app.state`` are
``async`` (they run on the event loop, no hand-off), the session is opened on the
event loop (no connection is taken before the first statement) and closed in a worker
thread only when it still holds a connection (the participant routes end their
transaction in their own thread), and settings are read from ``app.state``
rather than through a dependency override (FastAPI re-analyses an overridden
dependency's signature on every use).

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
from sqlalchemy import inspect
from sqlalchemy.orm import Session

from coordinator.admin_tokens import AdminCredential, authenticate_admin
from coordinator.db.models import Participant
from coordinator.errors import ProblemError
from coordinator.metrics import Metrics
from coordinator.participant_tokens import authenticate_participant
from coordinator.ratelimit import ClientLimits, client_key
from coordinator.rounds.driver import RoundDriver
from coordinator.settings import Settings

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
    "authenticated",
    "client_limits",
    "limit_enrollment",
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
admin_bearer = HTTPBearer(auto_error=False, scheme_name="AdminToken")
_participant_bearer = HTTPBearer(auto_error=False, scheme_name="ParticipantToken")


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
    """Every enrollment attempt spends one unit of the address's enrollment allowance."""
    key = client_key(request.client.host if request.client else None)
    wait = client_limits(request).enrollment.hit(key, now.timestamp())
    if wait > 0:
        log.debug("enrollment attempts limit reached for %s", key)
        raise _rate_limited(wait, "enrollment attempts")
