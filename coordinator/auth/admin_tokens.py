"""Admin credentials: the settings' token plus named tokens managed through the API.

The settings' ``admin_token`` (``SECFPP_ADMIN_TOKEN``) is the credential named
``settings``: it bootstraps a fresh coordinator and cannot be revoked through the API
(change or unset it in the environment and restart). Named tokens (``sfa_...``) are
created and revoked by any admin at run time, stored as SHA-256 digests, and take
effect at once in every coordinator process sharing the database: rotating the admin
credential is *create a new named token, switch the clients, revoke the old one*.

A revocation that would leave no admin credential at all (no settings token and no
other active named token) is refused with ``last_admin_token``.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from secfpp.coordinator.auth.tokens import (
    ADMIN_PREFIX,
    digests_equal,
    hash_token,
    new_token,
    touch_last_used,
)
from secfpp.coordinator.db.models import AdminToken
from secfpp.coordinator.errors import ProblemError
from secfpp.crypto.rng import RandomSource

__all__ = [
    "NAME_PATTERN",
    "SETTINGS_TOKEN_NAME",
    "AdminCredential",
    "authenticate_admin",
    "create_admin_token",
    "list_admin_tokens",
    "revoke_admin_token",
]

log = logging.getLogger(__name__)

SETTINGS_TOKEN_NAME = "settings"  # noqa: S105 - a name, not a secret
NAME_PATTERN = r"^[a-z0-9][a-z0-9._-]{0,63}$"
_NAME = re.compile(NAME_PATTERN)


@dataclass(frozen=True)
class AdminCredential:
    """Who an admin request authenticated as (never the token)."""

    name: str


def authenticate_admin(
    session: Session, token: str | None, settings_token: str, now: datetime
) -> AdminCredential:
    """The admin credential ``token`` is; ``invalid_token`` (401) otherwise.

    The settings' token is checked first (digest against digest, constant time) so that
    it works even when the database does not.
    """
    if not token:
        raise ProblemError("invalid_token", "an admin bearer token is required")
    digest = hash_token(token)
    if settings_token and digests_equal(hash_token(settings_token), digest):
        return AdminCredential(SETTINGS_TOKEN_NAME)
    row = session.scalars(
        select(AdminToken).where(AdminToken.token_hash == digest, AdminToken.revoked_at.is_(None))
    ).first()
    if row is None or not digests_equal(row.token_hash, digest):
        raise ProblemError("invalid_token", "a valid admin bearer token is required")
    touch_last_used(
        session, AdminToken.id == row.id, AdminToken.last_used_at, row.last_used_at, now
    )
    return AdminCredential(row.name)


def list_admin_tokens(session: Session) -> list[AdminToken]:
    """Every named admin token, active and revoked, by creation (id)."""
    return list(session.scalars(select(AdminToken).order_by(AdminToken.id)))


def create_admin_token(
    session: Session, name: str, now: datetime, rng: RandomSource | None = None
) -> tuple[AdminToken, str]:
    """A new named admin token (returned once). Names are never reused, revoked or not.

    Raises ``invalid_parameter`` (422) for a name outside :data:`NAME_PATTERN`,
    ``token_name_taken`` (409) for ``settings`` or a name used before.
    """
    if not _NAME.fullmatch(name):
        raise ProblemError(
            "invalid_parameter", f"name must match {NAME_PATTERN}, not {name!r}", parameter="name"
        )
    if name == SETTINGS_TOKEN_NAME:
        raise ProblemError("token_name_taken", f"{name!r} is the settings' admin token")
    token = new_token(ADMIN_PREFIX, rng)
    row = AdminToken(name=name, token_hash=hash_token(token), created_at=now)
    session.add(row)
    try:
        session.commit()
    except IntegrityError:
        session.rollback()
        raise ProblemError(
            "token_name_taken", f"an admin token named {name!r} exists (names are not reused)"
        ) from None
    log.info("admin token %r created", name)
    return row, token


def revoke_admin_token(
    session: Session, name: str, now: datetime, *, settings_token_set: bool
) -> AdminToken:
    """Revoke the named admin token (idempotent). Raises ``token_in_settings`` (409) for
    ``settings``, ``token_not_found`` (404), ``last_admin_token`` (409)."""
    if name == SETTINGS_TOKEN_NAME:
        raise ProblemError(
            "token_in_settings",
            "the 'settings' admin token is SECFPP_ADMIN_TOKEN: change or unset it and restart",
        )
    row = session.scalars(select(AdminToken).where(AdminToken.name == name)).first()
    if row is None:
        raise ProblemError("token_not_found", f"no admin token named {name!r}")
    if row.revoked_at is not None:
        return row
    others = session.scalar(
        select(func.count())
        .select_from(AdminToken)
        .where(AdminToken.revoked_at.is_(None), AdminToken.id != row.id)
    )
    if not settings_token_set and not others:
        raise ProblemError(
            "last_admin_token",
            f"{name!r} is the only admin credential left; create another one first",
        )
    session.execute(
        update(AdminToken)
        .where(AdminToken.id == row.id, AdminToken.revoked_at.is_(None))
        .values(revoked_at=now)
        .execution_options(synchronize_session=False)
    )
    session.commit()
    session.refresh(row)
    log.info("admin token %r revoked", name)
    return row
