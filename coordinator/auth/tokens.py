"""Bearer tokens of the coordinator: issue, verify, rotate, revoke, list.

Three kinds, all 256 random bits from :class:`crypto.rng.SystemRandom` (or an injected
:class:`~crypto.rng.RandomSource`), base64url, with a prefix naming the kind:

* ``sfe_...`` enrollment tokens: one-time, expiring, revocable while unused;
* ``sfp_...`` participant API tokens: rotatable; revoking the participant kills it;
* ``sfa_...`` named admin tokens created through the API (the settings' ``admin_token``
  is one more admin credential, named ``settings``, that lives only in the settings).

A token is shown once, when issued, and stored only as its SHA-256 hex digest. A
presented token is looked up by its digest and the stored digest is then compared with
:func:`hmac.compare_digest`; the index lookup's timing can depend only on the digest,
which reveals nothing usable about a 256-bit token (finding a token from a digest
prefix is a preimage search). Every authentication failure gives the same problem
(``invalid_token``), whether the token is unknown, revoked or malformed.

``last used`` times are kept to :data:`LAST_USED_RESOLUTION` so that a busy token costs
one write a minute, not one per request; the write is best effort.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, or_, update
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import InstrumentedAttribute, Session

from secfpp.crypto.rng import RandomSource, SystemRandom

__all__ = [
    "ADMIN_PREFIX",
    "ENROLLMENT_PREFIX",
    "LAST_USED_RESOLUTION",
    "PARTICIPANT_PREFIX",
    "TOKEN_BYTES",
    "digests_equal",
    "hash_token",
    "new_token",
    "touch_last_used",
]

log = logging.getLogger(__name__)

ENROLLMENT_PREFIX = "sfe_"
PARTICIPANT_PREFIX = "sfp_"
ADMIN_PREFIX = "sfa_"
TOKEN_BYTES = 32
"""Random bytes per token (256 bits)."""
LAST_USED_RESOLUTION = timedelta(seconds=60)


def new_token(prefix: str, rng: RandomSource | None = None) -> str:
    """``prefix`` + unpadded base64url of :data:`TOKEN_BYTES` random bytes (43 characters,
    256 bits)."""
    raw = (rng or SystemRandom()).random_bytes(TOKEN_BYTES)
    return prefix + base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def hash_token(token: str) -> str:
    """SHA-256 hex digest (64 characters) of the token's UTF-8 bytes: what is stored."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def digests_equal(stored: str, presented: str) -> bool:
    """Constant-time equality of two hex digests."""
    return hmac.compare_digest(stored.encode("ascii"), presented.encode("ascii"))


def touch_last_used(
    session: Session,
    row_id: ColumnElement[Any] | Any,
    column: InstrumentedAttribute[datetime | None],
    last: datetime | None,
    now: datetime,
) -> None:
    """Set ``column`` of the row to ``now`` if it is older than the resolution; commit.

    ``row_id`` is the where-clause selecting the row (e.g. ``Participant.id == pid``).
    A failed write (e.g. a busy SQLite file) is rolled back and only logged: the time a
    token was last used is bookkeeping, never a reason to refuse a request.
    """
    if last is not None and now - last < LAST_USED_RESOLUTION:
        return
    try:
        session.execute(
            update(column.class_)
            .where(row_id, or_(column.is_(None), column < now - LAST_USED_RESOLUTION))
            .values({column.key: now})
            .execution_options(synchronize_session=False)
        )
        session.commit()
    except SQLAlchemyError as err:
        session.rollback()
        log.warning("could not record the last use of a token: %s", type(err).__name__)
