"""Path and query parameters shared by the routes, with their bounds in the schema.

``RoundNumber`` stops at ``2**31 - 1`` (the database column is a 32-bit integer), ids are
short ASCII words, and list operations page with ``limit`` and a ``cursor``: the sort
key of the last item seen, so a page never repeats or skips an item when others are
added meanwhile. Its form is a pattern in the schema, and every value of that form is
accepted (a key past the last item gives an empty page), so a client that follows the
schema never has a cursor refused.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Annotated

from fastapi import Path, Query

from secfpp.wire import limits

__all__ = [
    "Cursor",
    "FederationCursor",
    "FederationId",
    "PageLimit",
    "ParticipantRef",
    "RoundNumber",
    "federation_cursor",
    "int_cursor",
    "read_federation_cursor",
    "read_int_cursor",
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

INT_CURSOR_PATTERN = r"^[0-9]{1,10}$"
"""A cursor of a list ordered by an integer key: the last key seen, in decimal."""

FEDERATION_CURSOR_PATTERN = r"^[0-9]{1,16}\.[0-9A-Za-z_-]{1,64}$"
"""A cursor of the federations: ``<created_at in microseconds since 1970 UTC>.<id>``."""

_CURSOR_DOC = (
    "`next_cursor` of the previous page; omit it for the first page. It is the sort key "
    "of the last item seen, so any value of this form is accepted: the page holds the "
    "items after it (none past the last)."
)

Cursor = Annotated[
    str | None,
    Query(min_length=1, max_length=10, pattern=INT_CURSOR_PATTERN, description=_CURSOR_DOC),
]
"""The cursor of a list ordered by an integer key (round number, LCC index, token id)."""

FederationCursor = Annotated[
    str | None,
    Query(min_length=3, max_length=81, pattern=FEDERATION_CURSOR_PATTERN, description=_CURSOR_DOC),
]
"""The cursor of the federations list (creation time, then id)."""

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def int_cursor(key: int) -> str:
    """The cursor after integer key ``key``."""
    return str(key)


def read_int_cursor(cursor: str) -> int:
    """The key in a cursor matching :data:`INT_CURSOR_PATTERN` (above ``2**31 - 1``, the
    largest key a database column holds, it stands for that largest key)."""
    return min(int(cursor), limits.INT32_MAX)


def federation_cursor(created_at: datetime, federation_id: str) -> str:
    """The cursor after the federation created at ``created_at`` (UTC) with this id."""
    if created_at.tzinfo is None:
        created_at = created_at.replace(tzinfo=UTC)
    return f"{(created_at - _EPOCH) // timedelta(microseconds=1)}.{federation_id}"


def read_federation_cursor(cursor: str) -> tuple[datetime, str]:
    """``(created_at, id)`` of a cursor matching :data:`FEDERATION_CURSOR_PATTERN` (16
    digits of microseconds reach the year 2286, far inside ``datetime``'s range)."""
    micros, _, federation_id = cursor.partition(".")
    return _EPOCH + timedelta(microseconds=int(micros)), federation_id
