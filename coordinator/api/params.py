"""Path and query parameters shared by the routes, with their bounds in the schema.

``RoundNumber`` stops at ``2**31 - 1`` (the database column is a 32-bit integer), ids are
short ASCII words, and list operations page with ``limit`` and an opaque ``cursor``
(:func:`encode_cursor` / :func:`decode_cursor`): the sort key of the last item seen,
so a page never repeats or skips an item when others are added meanwhile.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Annotated, Any

from fastapi import Path, Query

from coordinator import limits
from coordinator.errors import ProblemError

__all__ = [
    "Cursor",
    "FederationId",
    "PageLimit",
    "ParticipantRef",
    "RoundNumber",
    "bad_cursor",
    "decode_cursor",
    "encode_cursor",
]

ID_PATTERN = r"^[0-9A-Za-z_-]{1,64}$"

FederationId = Annotated[
    str,
    Path(
        pattern=ID_PATTERN,
        description="Id of the federation (as returned when it was created).",
        examples=["5b0f3c1e-8f1a-4d1e-9a57-3f0c2b7d9e11"],
    ),
]

ParticipantRef = Annotated[
    str,
    Path(
        pattern=ID_PATTERN,
        description="`me`, or the caller's own participant id.",
        examples=["me"],
    ),
]

RoundNumber = Annotated[
    int,
    Path(
        ge=1,
        le=limits.INT32_MAX,
        description="Round number, 1 for the first round of the federation.",
        examples=[1],
    ),
]

PageLimit = Annotated[
    int,
    Query(
        ge=1,
        le=limits.MAX_PAGE_LIMIT,
        description="Items per page.",
    ),
]

Cursor = Annotated[
    str | None,
    Query(
        max_length=200,
        pattern=r"^[A-Za-z0-9_-]*$",
        description="`next_cursor` of the previous page; omit it for the first page.",
    ),
]


def encode_cursor(*key: Any) -> str:
    """The opaque cursor of a sort key (JSON values), base64url without padding."""
    raw = json.dumps(list(key), separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def bad_cursor() -> ProblemError:
    """The problem of a cursor that no page of this list returned."""
    return ProblemError(
        "invalid_request", "cursor is not a next_cursor of this list", parameter="cursor"
    )


def decode_cursor(cursor: str, types: tuple[type, ...]) -> tuple[Any, ...]:
    """The sort key in ``cursor``; ``invalid_request`` unless it holds ``types`` in order."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        key = json.loads(raw)
    except (binascii.Error, ValueError):
        key = None
    if (
        not isinstance(key, list)
        or len(key) != len(types)
        or not all(type(v) is t for v, t in zip(key, types, strict=True))
    ):
        raise bad_cursor()
    return tuple(key)
