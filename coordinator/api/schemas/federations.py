"""Request and response bodies of the API (pydantic), with OpenAPI examples.

The messages participants exchange with the coordinator are the wire schema's
(:mod:`secfpp.wire.messages`, shared with the participant daemon: the routes import them from
there); this module holds what only the HTTP layer and its admins see: federations,
enrollment-token batches, lifecycle bodies, participant records and the list pages.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import ConfigDict, Field

from secfpp.federation import FederationConfig
from secfpp.wire import limits
from secfpp.wire.messages import FederationStatus, ParticipantIdentity
from secfpp.wire.types import WireModel

__all__ = [
    "AbortRequest",
    "EnrollmentTokens",
    "EnrollmentTokensRequest",
    "FederationOut",
    "FederationPage",
    "LifecycleRequest",
    "ParticipantOut",
    "ParticipantPage",
    "ParticipantSummary",
    "RoundPage",
    "RoundSummary",
]

_Model = WireModel


# -- admin ------------------------------------------------------------------------------
class FederationOut(_Model):
    id: str
    name: str
    created_at: datetime
    config: FederationConfig
    enrolled: int = Field(description="Participants enrolled so far.")
    current_round: int | None = Field(description="Number of the newest round, if any.")
    status: FederationStatus


class LifecycleRequest(_Model):
    """The optional body of pause and abort: a reason shown in the API and dashboard."""

    reason: limits.PlainText | None = Field(default=None, max_length=500)

    model_config = ConfigDict(json_schema_extra={"examples": [{"reason": "holiday freeze"}]})


class EnrollmentTokensRequest(_Model):
    count: int = Field(default=1, ge=1, le=limits.MAX_ENROLLMENT_TOKENS)
    ttl_s: int | None = Field(
        default=None,
        ge=1,
        le=limits.MAX_ENROLLMENT_TTL_S,
        description="Seconds the tokens stay valid (at most a year); null: the settings' TTL.",
    )

    model_config = ConfigDict(json_schema_extra={"examples": [{"count": 8, "ttl_s": 86400}]})


class EnrollmentTokens(_Model):
    federation_id: str
    tokens: list[str] = Field(description="One-time tokens; shown only now.")
    ids: list[int] = Field(
        description="Their ids, in the same order: what the token list and revocation use."
    )
    expires_at: datetime


class AbortRequest(_Model):
    reason: limits.PlainText = Field(default="aborted by admin", max_length=500)

    model_config = ConfigDict(json_schema_extra={"examples": [{"reason": "wrong data split"}]})


# -- participants -------------------------------------------------------------------------
# ``GET /v1/participants/me``: the wire schema's MeResponse (secfpp.wire.messages), with the
# config typed as the federation schema it is (no docstring: the OpenAPI schema stays as it was).
class ParticipantOut(ParticipantIdentity):
    config: FederationConfig


# -- lists ------------------------------------------------------------------------------
NEXT_CURSOR = "Opaque: pass it as `cursor` to get the next page; null on the last page."


class FederationPage(_Model):
    """Federations, oldest first (ties by id)."""

    items: list[FederationOut]
    next_cursor: str | None = Field(description=NEXT_CURSOR)


class RoundSummary(_Model):
    number: int
    stage: str
    started_at: datetime
    deadline: datetime | None
    finished_at: datetime | None
    failure_reason: str | None


class RoundPage(_Model):
    """Rounds of a federation by number."""

    items: list[RoundSummary]
    next_cursor: str | None = Field(description=NEXT_CURSOR)


class ParticipantSummary(_Model):
    participant_id: str
    index: int = Field(description="Fixed LCC index (0-based).")
    display_name: str
    enrolled_at: datetime
    revoked: bool = Field(description="Revoked: its token no longer works, it joins no round.")


class ParticipantPage(_Model):
    """Participants of a federation by LCC index."""

    items: list[ParticipantSummary]
    next_cursor: str | None = Field(description=NEXT_CURSOR)
