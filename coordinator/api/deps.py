"""Dependencies of the routes, as ``Annotated`` aliases.

The engine, session factory, driver, clock and metrics live on ``app.state`` (created
by the lifespan); settings come from :func:`~coordinator.settings.get_settings`, which
``create_app(settings)`` overrides.
"""

from __future__ import annotations

import hmac
from collections.abc import Iterator
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from sqlalchemy.orm import Session

from coordinator.db.models import Participant
from coordinator.errors import ProblemError
from coordinator.federations import authenticate_participant
from coordinator.metrics import Metrics
from coordinator.rounds.driver import RoundDriver
from coordinator.settings import Settings, get_settings

__all__ = [
    "CurrentParticipant",
    "DriverDep",
    "MetricsDep",
    "Now",
    "SessionDep",
    "SettingsDep",
    "require_admin",
]

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


def require_admin(
    settings: SettingsDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_admin_bearer)],
) -> None:
    """The admin bearer token from the settings (constant-time compare)."""
    expected = settings.admin_token.get_secret_value()
    given = "" if credentials is None else credentials.credentials
    if not expected or not hmac.compare_digest(given.encode(), expected.encode()):
        raise ProblemError("invalid_token", "a valid admin bearer token is required")


def current_participant(
    session: SessionDep,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_participant_bearer)],
) -> Participant:
    return authenticate_participant(
        session, None if credentials is None else credentials.credentials
    )


CurrentParticipant = Annotated[Participant, Depends(current_participant)]
