"""The dashboard's routes (HTML, server-rendered) and the API route that mints login links.

Every page needs a dashboard session (:mod:`coordinator.auth.dashboard_sessions`); without one a
page answers ``303`` to the login form and shows no data, a fragment answers ``401``.
State-changing requests are POSTs carrying the session's CSRF token.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Annotated, Any
from urllib.parse import parse_qs, quote

from fastapi import APIRouter, Depends, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from secfpp.coordinator.api.body import (
    UNAUTHENTICATED_MAX_BODY,
    BodyGate,
    FormRoute,
    GuardedRoute,
    reads_body,
    register_gate,
)
from secfpp.coordinator.api.deps import (
    AdminCredentials,
    AdminDep,
    Now,
    SessionDep,
    SettingsDep,
    authenticated,
    in_session,
)
from secfpp.coordinator.api.params import FederationId
from secfpp.coordinator.auth.admin_tokens import authenticate_admin
from secfpp.coordinator.auth.dashboard_sessions import (
    COOKIE,
    SESSION_TTL_S,
    DashboardAuthError,
    LoggedIn,
    check_csrf,
    check_origin,
    end_session,
    issue_link,
    open_session,
    plain_http_refused,
    redeem_link,
    resume_session,
)
from secfpp.coordinator.auth.participant_tokens import (
    get_participant,
    participants_of,
    revoke_participant,
    rotate_participant_token,
)
from secfpp.coordinator.dashboard import charts, pages
from secfpp.coordinator.errors import ProblemError
from secfpp.coordinator.rounds import control

__all__ = ["FRAGMENTS", "PREFIX", "links_router", "router", "templates"]

PREFIX = "/dashboard"
FRAGMENTS = ("/timeline", "/sections", "/status", "/federations-table")
"""Endings of the parts of pages that ``dashboard.js`` polls: without a session they
answer 401 (the script says the session ended), not a redirect to the login form."""
TIMELINE_ROUNDS = 12
templates = Jinja2Templates(directory=str(Path(__file__).parent / "templates"))
templates.env.globals.update(palette=charts.PALETTE, colour=charts.cluster_colour, prefix=PREFIX)
templates.env.filters["zip"] = zip


def _duration(seconds: float) -> str:
    """``12.3 s``, ``4 min 05 s`` or ``2 h 03 min``."""
    if seconds < 120:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(int(seconds), 60)
    if minutes < 120:
        return f"{minutes} min {secs:02d} s"
    return f"{minutes // 60} h {minutes % 60:02d} min"


def _few(indices: list[int], limit: int = 12) -> str:
    """At most ``limit`` indices, then how many more."""
    shown = ", ".join(str(i) for i in indices[:limit])
    return shown + (f" … (+{len(indices) - limit})" if len(indices) > limit else "")


templates.env.filters["duration"] = _duration
templates.env.filters["few"] = _few

router = APIRouter(prefix=PREFIX, include_in_schema=False, route_class=FormRoute)


def _settings_token(settings: SettingsDep) -> str:
    return settings.admin_token.get_secret_value()


def require_dashboard(
    request: Request, session: SessionDep, settings: SettingsDep, now: Now
) -> LoggedIn:
    """The request's dashboard session, or :class:`DashboardAuthError` (no data leaks)."""
    return resume_session(session, request.cookies.get(COOKIE), _settings_token(settings), now)


Dashboard = Annotated[LoggedIn, Depends(require_dashboard)]


async def dashboard_gate(request: Request) -> None:
    """:func:`require_dashboard`'s check, before a form is read."""
    settings: SettingsDep = request.app.state.settings
    now: datetime = request.app.state.clock()
    await in_session(request, lambda session: require_dashboard(request, session, settings, now))


register_gate(require_dashboard, BodyGate(dashboard_gate, UNAUTHENTICATED_MAX_BODY))


@reads_body
async def form_fields(request: Request) -> dict[str, str]:
    """An ``application/x-www-form-urlencoded`` body (at most 8 KiB), first value per name."""
    body = await request.body()
    if len(body) > 8192:
        raise DashboardAuthError("form too large", status=413)
    parsed = parse_qs(body.decode("utf-8", "replace"), keep_blank_values=True)
    return {k: v[0] for k, v in parsed.items()}


Form = Annotated[dict[str, str], Depends(form_fields)]


def _page(request: Request, name: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    response: HTMLResponse = templates.TemplateResponse(
        request, name, context, status_code=status_code
    )
    return response


def _set_cookie(response: Response, secret: str) -> None:
    response.set_cookie(
        COOKIE,
        secret,
        max_age=SESSION_TTL_S,
        path=PREFIX,
        secure=True,
        httponly=True,
        samesite="strict",
    )


def _safe_next(target: str | None) -> str:
    """Only paths inside the dashboard (no open redirect)."""
    if target and target.startswith(PREFIX + "/") and "//" not in target and "\\" not in target:
        return target
    return PREFIX + "/"


# -- login, links, logout ------------------------------------------------------------------


@router.get("", response_class=RedirectResponse)
def root() -> RedirectResponse:
    return RedirectResponse(PREFIX + "/", status_code=status.HTTP_303_SEE_OTHER)


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request, next: str | None = None) -> HTMLResponse:
    return _page(request, "login.html", next=_safe_next(next), error=None)


@router.post("/login", response_class=HTMLResponse)
def login(
    request: Request, session: SessionDep, settings: SettingsDep, now: Now, form: Form
) -> Response:
    target = _safe_next(form.get("next"))
    check_origin(request)
    if plain_http_refused(request):
        return _page(
            request,
            "login.html",
            403,
            next=target,
            error="The dashboard needs HTTPS except on loopback: start the coordinator with "
            "SECFPP_TLS_CERTFILE and SECFPP_TLS_KEYFILE, or put it behind a TLS proxy.",
        )
    token = form.get("token", "").strip()
    expected = _settings_token(settings)
    try:
        who = authenticated(
            request, now, lambda t: authenticate_admin(session, t, expected, now), token
        )
    except ProblemError as err:
        session.rollback()
        message = (
            "Too many failed logins from this address; try again later."
            if err.code == "rate_limited"
            else "That is not an active admin token (participant tokens cannot log in)."
        )
        return _page(request, "login.html", err.status, next=target, error=message)
    _, secret = open_session(session, who.name, token, now)
    response = RedirectResponse(target, status_code=status.HTTP_303_SEE_OTHER)
    _set_cookie(response, secret)
    return response


@router.get("/link", response_class=HTMLResponse)
def link_form(request: Request, code: str = "") -> HTMLResponse:
    """Shows a button; only its same-origin POST spends the link."""
    return _page(request, "link.html", code=code[:128])


@router.post("/link", response_class=HTMLResponse)
def link_login(
    request: Request, session: SessionDep, settings: SettingsDep, now: Now, form: Form
) -> Response:
    check_origin(request)
    if plain_http_refused(request):
        return _page(request, "login.html", 403, next=PREFIX + "/", error="HTTPS required.")
    try:
        _, secret = redeem_link(session, form.get("code"), _settings_token(settings), now)
    except DashboardAuthError as err:
        return _page(request, "login.html", 401, next=PREFIX + "/", error=err.reason)
    response = RedirectResponse(PREFIX + "/", status_code=status.HTTP_303_SEE_OTHER)
    _set_cookie(response, secret)
    return response


@router.post("/logout")
def logout(request: Request, session: SessionDep, now: Now, me: Dashboard, form: Form) -> Response:
    check_csrf(request, me, form.get("csrf"))
    end_session(session, me, now)
    response = RedirectResponse(PREFIX + "/login", status_code=status.HTTP_303_SEE_OTHER)
    response.delete_cookie(COOKIE, path=PREFIX, secure=True, httponly=True, samesite="strict")
    return response


# -- pages ---------------------------------------------------------------------------------


@router.get("/", response_class=HTMLResponse)
def federations(request: Request, session: SessionDep, me: Dashboard) -> HTMLResponse:
    return _page(request, "federations.html", me=me, rows=pages.federation_rows(session))


@router.get("/federations-table", response_class=HTMLResponse)
def federations_table(request: Request, session: SessionDep, me: Dashboard) -> HTMLResponse:
    """The live part of the federations list (polled by ``dashboard.js``)."""
    return _page(request, "_federations_table.html", rows=pages.federation_rows(session))


def _federation_context(session: SessionDep, federation_id: str) -> dict[str, Any]:
    """What the federation page and its live sections render."""
    view = pages.federation_view(session, federation_id, timeline_rounds=TIMELINE_ROUNDS)
    return {
        "view": view,
        "heatmap": charts.heatmap(
            [f"{p.lcc_index}: {p.display_name[:28]}" for p in view.participants],
            view.heat_rounds,
            view.heat_cells,
        ),
        "privacy": pages.privacy_summary(view.config),
        "accuracy_chart": _accuracy_chart(view),
        "split_chart": _split_chart(view),
    }


@router.get("/federations/{federation_id}", response_class=HTMLResponse)
def federation(
    request: Request, session: SessionDep, now: Now, me: Dashboard, federation_id: FederationId
) -> HTMLResponse:
    return _page(
        request,
        "federation.html",
        me=me,
        now=now,
        notice=request.query_params.get("notice", "")[:200],
        **_federation_context(session, federation_id),
    )


@router.get("/federations/{federation_id}/sections", response_class=HTMLResponse)
def sections(
    request: Request, session: SessionDep, me: Dashboard, federation_id: FederationId
) -> HTMLResponse:
    """Clusters, privacy, what the coordinator learned, accuracy (polled by ``dashboard.js``)."""
    return _page(request, "_sections.html", **_federation_context(session, federation_id))


@router.get("/federations/{federation_id}/status", response_class=HTMLResponse)
def federation_status(
    request: Request, session: SessionDep, me: Dashboard, federation_id: FederationId
) -> HTMLResponse:
    """The federation's lifecycle line (polled by ``dashboard.js``)."""
    return _page(request, "_status.html", view=pages.status_view(session, federation_id))


LIFECYCLE = ("pause", "resume", "abort")


@router.post("/federations/{federation_id}/{action}", response_class=HTMLResponse)
def lifecycle(
    request: Request,
    session: SessionDep,
    now: Now,
    me: Dashboard,
    form: Form,
    federation_id: FederationId,
    action: str,
) -> Response:
    """Pause, resume or abort, as ``POST /v1/federations/{id}/pause|resume|abort`` do
    (the CSRF token first; abort needs its confirmation box ticked)."""
    check_csrf(request, me, form.get("csrf"))
    if action not in LIFECYCLE:
        raise DashboardAuthError(f"unknown action {action!r}", status=404)
    fed = pages.get_federation(session, federation_id)
    reason = form.get("reason", "").strip()[:200] or None
    try:
        if action == "pause":
            control.pause(session, fed, reason, now)
        elif action == "resume":
            control.resume(session, fed, now)
        elif form.get("confirm") != "yes":
            return _page(
                request, "error.html", 422, me=me, message="Tick the box to confirm the abort."
            )
        else:
            control.abort(session, fed, reason, now)
    except ProblemError as err:
        return _page(request, "error.html", err.status, me=me, message=err.detail)
    notice = quote(
        f"federation {fed.status}" + (f": {fed.status_reason}" if fed.status_reason else "")
    )
    return RedirectResponse(
        f"{PREFIX}/federations/{federation_id}?notice={notice}", status.HTTP_303_SEE_OTHER
    )


@router.get("/federations/{federation_id}/timeline", response_class=HTMLResponse)
def timeline(
    request: Request, session: SessionDep, now: Now, me: Dashboard, federation_id: FederationId
) -> HTMLResponse:
    """The live part of the federation page (polled by ``dashboard.js``)."""
    lines = pages.timeline_view(session, federation_id, TIMELINE_ROUNDS)
    return _page(request, "_timeline.html", lines=lines, now=now, federation_id=federation_id)


@router.get("/federations/{federation_id}/participants", response_class=HTMLResponse)
def participants(
    request: Request, session: SessionDep, me: Dashboard, federation_id: FederationId
) -> HTMLResponse:
    federation = pages.get_federation(session, federation_id)
    return _page(
        request,
        "participants.html",
        me=me,
        federation=federation,
        people=participants_of(session, federation_id),
        notice=request.query_params.get("notice", "")[:200],
    )


ACTIONS = ("revoke", "rotate")


@router.get(
    "/federations/{federation_id}/participants/{participant_id}/{action}",
    response_class=HTMLResponse,
)
def confirm(
    request: Request,
    session: SessionDep,
    me: Dashboard,
    federation_id: FederationId,
    participant_id: FederationId,
    action: str,
) -> HTMLResponse:
    """The confirmation page of an admin action (nothing changes on GET)."""
    if action not in ACTIONS:
        raise DashboardAuthError(f"unknown action {action!r}", status=404)
    person = get_participant(session, federation_id, participant_id)
    return _page(request, "confirm.html", me=me, person=person, action=action)


@router.post(
    "/federations/{federation_id}/participants/{participant_id}/{action}",
    response_class=HTMLResponse,
)
def act(
    request: Request,
    session: SessionDep,
    now: Now,
    me: Dashboard,
    form: Form,
    federation_id: FederationId,
    participant_id: FederationId,
    action: str,
) -> Response:
    """Revoke or rotate, as ``POST .../revoke`` and ``POST .../token`` of the API do."""
    check_csrf(request, me, form.get("csrf"))
    if action not in ACTIONS:
        raise DashboardAuthError(f"unknown action {action!r}", status=404)
    back = f"{PREFIX}/federations/{federation_id}/participants"
    try:
        if action == "revoke":
            person = revoke_participant(session, federation_id, participant_id, now)
            notice = quote(f"participant {person.lcc_index} ({person.display_name}) revoked")
            return RedirectResponse(f"{back}?notice={notice}", status.HTTP_303_SEE_OTHER)
        person, token = rotate_participant_token(session, federation_id, participant_id, now)
    except ProblemError as err:
        return _page(request, "error.html", err.status, me=me, message=err.detail)
    return _page(request, "rotated.html", me=me, person=person, token=token, back=back)


# -- charts --------------------------------------------------------------------------------


def _accuracy_chart(view: pages.FederationView) -> Any:
    if not view.accuracy:
        return None
    series = [
        charts.Series(f"participant {i}", pts, "#777777", "faint")
        for i, pts in sorted(view.accuracy_by_participant.items())
    ]
    series.append(charts.Series("mean", view.accuracy["mean"], charts.PALETTE[0], "main"))
    series.append(
        charts.Series("10th percentile", view.accuracy["p10"], charts.PALETTE[5], "dashed")
    )
    return charts.line_chart(series, x_label="round", y_label="held-out accuracy")


def _split_chart(view: pages.FederationView) -> Any:
    if not view.splits:
        return None
    smallest: dict[int, float] = {}
    levels: dict[int, float] = {}
    for row in view.splits:
        if row.p_value is not None:
            smallest[row.round] = min(row.p_value, smallest.get(row.round, row.p_value))
        if row.level is not None:
            levels[row.round] = max(row.level, levels.get(row.round, row.level))
    if not smallest:
        return None
    alpha = view.config.clustering.false_split_rate
    series = [
        charts.Series("smallest p-value", sorted(smallest.items()), charts.PALETTE[0], "main")
    ]
    if levels:
        series.append(
            charts.Series("largest level", sorted(levels.items()), charts.PALETTE[1], "dashed")
        )
    return charts.line_chart(
        series,
        x_label="round",
        y_label="smallest split p-value of the tested clusters",
        y_range=(0.0, 1.05),
        hline=(alpha, f"false-split rate {alpha:g}"),
        height=200,
    )


# -- the API route that mints a login link ------------------------------------------------

links_router = APIRouter(prefix="/v1/admin", tags=["tokens"], route_class=GuardedRoute)


@links_router.post(
    "/dashboard-links",
    status_code=status.HTTP_201_CREATED,
    summary="Create a one-time dashboard login link (valid 15 minutes)",
    responses={
        401: {"description": "Missing or wrong admin token (`invalid_token`)"},
        429: {"description": "`rate_limited`: too many authentication failures"},
    },
)
def dashboard_link(
    request: Request,
    session: SessionDep,
    now: Now,
    admin: AdminDep,
    credentials: AdminCredentials,
) -> dict[str, str | datetime]:
    """A link that logs a browser into the dashboard once, as the calling admin token
    (and only while that token stays active). Open it within 15 minutes."""
    assert credentials is not None  # require_admin accepted it
    secret, expires = issue_link(session, admin.name, credentials.credentials, now)
    base = str(request.base_url).rstrip("/")
    return {"url": f"{base}{PREFIX}/link?code={secret}", "expires_at": expires}
