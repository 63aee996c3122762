"""Dependencies of the routes, as ``Annotated`` aliases.

The engine, session factory, driver, clock, metrics and the per-address rate limiters
(:class:`~coordinator.ratelimit.ClientLimits`) live on ``app.state``; settings come from
:func:`~coordinator.settings.get_settings`, which ``create_app(settings)`` overrides.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Annotated, TypeVar

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from coordinator.admin_tokens import AdminCredential, authenticate_admin
from coordinator.db.models import Participant
from coordinator.errors import ProblemError
from coordinator.metrics import Metrics
from coordinator.participant_tokens import authenticate_participant
from coordinator.ratelimit import ClientLimits, client_key
from coordinator.rounds.driver import RoundDriver
from coordinator.settings import Settings, get_settings

__all__ = [
    "AdminDep",
    "CurrentParticipant",
    "DriverDep",
    "MetricsDep",
    "Now",
    "SessionDep",
    "SettingsDep",
    "client_limits",
    "limit_enrollment",
    "require_admin",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

SettingsDep = Annotated[Settings, Depends(get_settings)]

_admin_bearer = HTTPBearer(auto_error=False, scheme_name="AdminToken")
_participant_bearer = HTTPBearer(auto_error=False, scheme_name="ParticipantToken")


def get_session(request: Request) -> Iterator[Session]:
    with request.app.state.sessions() as session:
        yield session


SessionDep = Annotated[Session, Depends(get_session)]


def get_driver(request: Request) -> RoundDriver:
    driver: RoundDriver = request.app.state.driver
    return driver


DriverDep = Annotated[RoundDriver, Depends(get_driver)]


def get_metrics(request: Request) -> Metrics:
    metrics: Metrics = request.app.state.metrics
    return metrics


MetricsDep = Annotated[Metrics, Depends(get_metrics)]


def get_now(request: Request) -> datetime:
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


def _authenticated(
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


def require_admin(
    request: Request,
    session: SessionDep,
    settings: SettingsDep,
    now: Now,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_admin_bearer)],
) -> AdminCredential:
    """An admin bearer token: the settings' token or an active named admin token."""
    expected = settings.admin_token.get_secret_value()
    return _authenticated(
        request,
        now,
        lambda token: authenticate_admin(session, token, expected, now),
        None if credentials is None else credentials.credentials,
    )


AdminDep = Annotated[AdminCredential, Depends(require_admin)]


def current_participant(
    request: Request,
    session: SessionDep,
    now: Now,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_participant_bearer)],
) -> Participant:
    return _authenticated(
        request,
        now,
        lambda token: authenticate_participant(session, token, now),
        None if credentials is None else credentials.credentials,
    )


CurrentParticipant = Annotated[Participant, Depends(current_participant)]


def limit_enrollment(request: Request, now: Now) -> None:
    """Every enrollment attempt spends one unit of the address's enrollment allowance."""
    key = client_key(request.client.host if request.client else None)
    wait = client_limits(request).enrollment.hit(key, now.timestamp())
    if wait > 0:
        log.debug("enrollment attempts limit reached for %s", key)
        raise _rate_limited(wait, "enrollment attempts")
