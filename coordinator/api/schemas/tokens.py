"""Request and response bodies of the token-lifecycle operations.

No response here carries a token's digest; a token itself appears only in the answer of
the operation that created it (``...Issued`` models), once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from secfpp.coordinator.auth.admin_tokens import NAME_PATTERN
from secfpp.coordinator.auth.participant_tokens import EnrollmentState

__all__ = [
    "AdminTokenCreate",
    "AdminTokenIssued",
    "AdminTokenOut",
    "EnrollmentTokenOut",
    "EnrollmentTokenPage",
    "ParticipantTokenIssued",
    "ParticipantTokenOut",
    "RevokedEnrollmentTokens",
]

TIME_NOTE = "Kept to the minute: a token in constant use is written once a minute."


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ParticipantTokenOut(_Model):
    """A participant and the state of its API token."""

    participant_id: str
    index: int = Field(description="Its fixed LCC index.")
    display_name: str
    enrolled_at: datetime
    token_issued_at: datetime = Field(
        description="When the current token was issued (enrollment or last rotation)."
    )
    token_last_used_at: datetime | None = Field(description=f"Last authentication. {TIME_NOTE}")
    state: Literal["active", "revoked"]
    revoked_at: datetime | None

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "participant_id": "5b0e7c1e-3f4a-4d35-9a43-0f2b8f6f1c2d",
                    "index": 3,
                    "display_name": "hospital-d",
                    "enrolled_at": "2026-11-22T12:00:00Z",
                    "token_issued_at": "2026-11-23T08:30:00Z",
                    "token_last_used_at": "2026-11-23T09:12:00Z",
                    "state": "active",
                    "revoked_at": None,
                }
            ]
        }
    )


class ParticipantTokenIssued(_Model):
    """A participant's new API token: shown only in this response."""

    participant_id: str
    index: int
    api_token: str = Field(description="The new bearer token (sfp_...); the old one is dead.")
    issued_at: datetime


class EnrollmentTokenOut(_Model):
    """An enrollment token's record (never the token)."""

    id: int
    created_at: datetime
    expires_at: datetime
    state: EnrollmentState = Field(description="unused, used, expired or revoked.")
    used_at: datetime | None
    participant_id: str | None = Field(description="Who redeemed it, if it was used.")
    revoked_at: datetime | None


class EnrollmentTokenPage(_Model):
    """One page of enrollment tokens, in issue order."""

    items: list[EnrollmentTokenOut]
    next_cursor: str | None = Field(
        description="Pass as `cursor` for the next page; null on the last page."
    )


class RevokedEnrollmentTokens(_Model):
    revoked: list[int] = Field(description="Ids of the enrollment tokens this call revoked.")


class AdminTokenCreate(_Model):
    name: str = Field(
        pattern=NAME_PATTERN,
        description="Lower-case name, unique forever (revoked names are not reused); "
        "`settings` is the settings' token.",
    )

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"name": "ops-2026-11"}]}
    )


class AdminTokenOut(_Model):
    """An admin credential (never the token)."""

    name: str
    source: Literal["settings", "api"] = Field(
        description="`settings`: SECFPP_ADMIN_TOKEN (change it there); `api`: created here."
    )
    created_at: datetime | None = Field(description="Null for the settings' token.")
    last_used_at: datetime | None = Field(
        description=f"Last authentication; null for the settings' token. {TIME_NOTE}"
    )
    state: Literal["active", "revoked"]
    revoked_at: datetime | None


class AdminTokenIssued(_Model):
    """A new admin token: shown only in this response."""

    name: str
    token: str = Field(description="The bearer token (sfa_...).")
    created_at: datetime
