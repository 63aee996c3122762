"""Dashboard sessions: the admin token exchanged for a cookie, CSRF tokens, login links.

* **Login.** The form posts an admin token (the settings' token or a named ``sfa_...``
  token; a participant's ``sfp_...`` token is refused like any wrong token, behind the
  same per-address limit on authentication failures as the API). The answer sets the
  cookie :data:`COOKIE`: a random 256-bit secret, ``HttpOnly; Secure; SameSite=Strict;
  Path=/dashboard``, ``Max-Age`` :data:`SESSION_TTL_S`. The database keeps only its
  SHA-256 digest (``dashboard_sessions``) with the digest of the admin credential that
  opened it.
* **Every request** re-checks that credential: revoking a named admin token (or
  changing ``SECFPP_ADMIN_TOKEN``) ends its dashboard sessions at once, in every
  process sharing the database. Logging out revokes the session row.
* **CSRF.** Each session has its own random token; every state-changing form carries it
  and it is compared in constant time; a request whose ``Origin`` names another origin
  is refused as well. ``SameSite=Strict`` already keeps the cookie off cross-site
  requests; the token is the second, independent check.
* **Secure cookies over plain HTTP.** The cookie is always ``Secure``. Browsers keep and
  send ``Secure`` cookies over HTTPS and, as "potentially trustworthy" origins, over
  ``http://127.0.0.1`` / ``http://localhost``; so the dashboard works over TLS (the
  coordinator's ``SECFPP_TLS_*`` or a TLS proxy) and, for local use and tests, over
  plain HTTP on loopback. A login over plain HTTP from any other address is refused
  (the token would cross the network in clear text and the cookie would be dropped).
* **One-time login links.** An admin (bearer token) may ask ``POST
  /v1/admin/dashboard-links`` for a link valid :data:`LINK_TTL_S` seconds; opening it
  shows a button whose same-origin POST redeems it once for a session of the same
  credential (a GET never logs in, so link previews cannot spend it).
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass
from datetime import datetime, timedelta
from urllib.parse import urlsplit

from fastapi import Request
from sqlalchemy import select, update
from sqlalchemy.orm import Session

from secfpp.coordinator.auth.admin_tokens import SETTINGS_TOKEN_NAME
from secfpp.coordinator.auth.tokens import hash_token
from secfpp.coordinator.db.models import AdminToken, DashboardSession
from secfpp.coordinator.rounds.store import rowcount
from secfpp.crypto.rng import RandomSource, SystemRandom

__all__ = [
    "COOKIE",
    "LINK_TTL_S",
    "SESSION_TTL_S",
    "DashboardAuthError",
    "LoggedIn",
    "check_csrf",
    "check_origin",
    "end_session",
    "issue_link",
    "open_session",
    "plain_http_refused",
    "redeem_link",
    "resume_session",
]

COOKIE = "secfpp_dashboard"
SESSION_TTL_S = 8 * 3600
"""A session lasts 8 hours from login (absolute, not sliding)."""
LINK_TTL_S = 15 * 60
"""A one-time login link is valid 15 minutes."""


class DashboardAuthError(Exception):
    """No valid dashboard session (or a refused CSRF check): ``reason`` says which."""

    def __init__(self, reason: str, *, status: int = 401) -> None:
        super().__init__(reason)
        self.reason = reason
        self.status = status


@dataclass(frozen=True)
class LoggedIn:
    """The admin behind a dashboard request (never the token or the cookie)."""

    session_id: int
    admin_name: str
    csrf_token: str
    expires_at: datetime


def _secret(rng: RandomSource | None) -> str:
    return (rng or SystemRandom()).random_bytes(32).hex()


def _credential_active(
    session: Session, admin_name: str, credential_hash: str, settings_token: str
) -> bool:
    if admin_name == SETTINGS_TOKEN_NAME:
        return bool(settings_token) and hmac.compare_digest(
            hash_token(settings_token), credential_hash
        )
    row = session.scalars(
        select(AdminToken.id).where(
            AdminToken.token_hash == credential_hash, AdminToken.revoked_at.is_(None)
        )
    ).first()
    return row is not None


def _insert(
    session: Session,
    kind: str,
    admin_name: str,
    credential_hash: str,
    now: datetime,
    ttl_s: int,
    rng: RandomSource | None,
) -> tuple[DashboardSession, str]:
    secret = _secret(rng)
    row = DashboardSession(
        kind=kind,
        secret_hash=hash_token(secret),
        admin_name=admin_name,
        credential_hash=credential_hash,
        csrf_token=_secret(rng),
        created_at=now,
        expires_at=now + timedelta(seconds=ttl_s),
    )
    session.add(row)
    session.commit()
    return row, secret


def open_session(
    session: Session,
    admin_name: str,
    admin_token: str,
    now: datetime,
    rng: RandomSource | None = None,
) -> tuple[LoggedIn, str]:
    """A new session for the admin credential ``admin_token`` (already authenticated);
    returns it and the cookie's secret (shown once, stored as a digest)."""
    row, secret = _insert(
        session, "session", admin_name, hash_token(admin_token), now, SESSION_TTL_S, rng
    )
    return LoggedIn(row.id, row.admin_name, row.csrf_token, row.expires_at), secret


def issue_link(
    session: Session,
    admin_name: str,
    admin_token: str,
    now: datetime,
    rng: RandomSource | None = None,
) -> tuple[str, datetime]:
    """A one-time login link's secret and expiry, for the credential ``admin_token``."""
    row, secret = _insert(
        session, "link", admin_name, hash_token(admin_token), now, LINK_TTL_S, rng
    )
    return secret, row.expires_at


def _find(session: Session, kind: str, secret: str | None) -> DashboardSession | None:
    if not secret or len(secret) > 128:
        return None
    return session.scalars(
        select(DashboardSession).where(
            DashboardSession.secret_hash == hash_token(secret), DashboardSession.kind == kind
        )
    ).first()


def resume_session(
    session: Session, cookie: str | None, settings_token: str, now: datetime
) -> LoggedIn:
    """The session the cookie names, if unexpired, not logged out and its admin
    credential still active; :class:`DashboardAuthError` otherwise."""
    row = _find(session, "session", cookie)
    if row is None:
        raise DashboardAuthError("not logged in")
    if row.revoked_at is not None:
        raise DashboardAuthError("logged out")
    if row.expires_at <= now:
        raise DashboardAuthError("session expired")
    if not _credential_active(session, row.admin_name, row.credential_hash, settings_token):
        raise DashboardAuthError("the admin token of this session was revoked")
    return LoggedIn(row.id, row.admin_name, row.csrf_token, row.expires_at)


def redeem_link(
    session: Session,
    secret: str | None,
    settings_token: str,
    now: datetime,
    rng: RandomSource | None = None,
) -> tuple[LoggedIn, str]:
    """Spend a one-time login link (compare-and-set on ``used_at``) for a new session."""
    row = _find(session, "link", secret)
    if row is None or row.expires_at <= now:
        raise DashboardAuthError("unknown or expired login link")
    if not _credential_active(session, row.admin_name, row.credential_hash, settings_token):
        raise DashboardAuthError("the admin token of this link was revoked")
    spent = session.execute(
        update(DashboardSession)
        .where(DashboardSession.id == row.id, DashboardSession.used_at.is_(None))
        .values(used_at=now)
        .execution_options(synchronize_session=False)
    )
    if rowcount(spent) != 1:
        session.rollback()
        raise DashboardAuthError("this login link was used already")
    fresh, cookie = _insert(
        session, "session", row.admin_name, row.credential_hash, now, SESSION_TTL_S, rng
    )
    return LoggedIn(fresh.id, fresh.admin_name, fresh.csrf_token, fresh.expires_at), cookie


def end_session(session: Session, logged_in: LoggedIn, now: datetime) -> None:
    """Log out: the cookie stops working at once."""
    session.execute(
        update(DashboardSession)
        .where(DashboardSession.id == logged_in.session_id, DashboardSession.revoked_at.is_(None))
        .values(revoked_at=now)
        .execution_options(synchronize_session=False)
    )
    session.commit()


def _origin_of(request: Request) -> str:
    url = request.base_url
    return f"{url.scheme}://{url.netloc}"


def check_origin(request: Request) -> None:
    """Refuse (403) a POST whose ``Origin`` header names another origin (login included:
    no cross-site login into an attacker's session)."""
    origin = request.headers.get("origin")
    if origin is not None and origin != "null" and origin != _origin_of(request):
        raise DashboardAuthError(f"cross-origin request from {origin!r} refused", status=403)


def check_csrf(request: Request, logged_in: LoggedIn, submitted: str | None) -> None:
    """Refuse (403) a state-changing request without this session's CSRF token, or one
    whose ``Origin`` header names another origin."""
    check_origin(request)
    if not submitted or not hmac.compare_digest(submitted, logged_in.csrf_token):
        raise DashboardAuthError("missing or wrong CSRF token", status=403)


def _loopback(host: str | None) -> bool:
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def plain_http_refused(request: Request) -> bool:
    """A login over plain HTTP from a non-loopback client (see the module docstring)."""
    if request.url.scheme == "https":
        return False
    client = request.client.host if request.client else None
    host = urlsplit(str(request.base_url)).hostname
    return not (_loopback(client) and _loopback(host))
