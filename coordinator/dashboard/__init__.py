"""The operator's dashboard: server-rendered pages under ``/dashboard``.

:func:`install_dashboard` mounts the pages, their static assets (a few KB of CSS and a
polling script, served by the app: no CDN), the login-link API route, the handler that
turns a missing session into a redirect to the login form, and the security headers
of every dashboard answer (a strict Content-Security-Policy, no caching, no referrer).
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from secfpp.coordinator.api.routes import shared_routes
from secfpp.coordinator.auth.dashboard_sessions import DashboardAuthError
from secfpp.coordinator.dashboard.routes import FRAGMENTS, PREFIX, links_router, router, templates

__all__ = ["install_dashboard"]

HEADERS = {
    "content-security-policy": "default-src 'self'; img-src 'self' data:; style-src 'self'; "
    "script-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}


class DashboardHeaders:
    """Adds :data:`HEADERS` to every answer under ``/dashboard`` (pure ASGI middleware)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not str(scope.get("path", "")).startswith(PREFIX):
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {k.lower() for k, _ in headers}
                for name, value in HEADERS.items():
                    if name.encode() not in present:
                        headers.append((name.encode(), value.encode()))
                message["headers"] = headers
            await send(message)

        await self.app(scope, receive, with_headers)


def _auth_failed(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, DashboardAuthError)
    fragment = request.url.path.endswith(FRAGMENTS)
    if exc.status == 401 and request.method == "GET" and not fragment:
        target = request.url.path
        return RedirectResponse(
            f"{PREFIX}/login?next={target}", status_code=status.HTTP_303_SEE_OTHER
        )
    response: HTMLResponse = templates.TemplateResponse(
        request, "error.html", {"message": exc.reason, "me": None}, status_code=exc.status
    )
    return response


def install_dashboard(app: FastAPI) -> None:
    """Mount the dashboard on ``app`` (see the module docstring)."""
    app.router.routes.extend(shared_routes(router, links_router))
    app.mount(
        PREFIX + "/static",
        StaticFiles(directory=Path(__file__).parent / "static"),
        name="dashboard-static",
    )
    app.add_exception_handler(DashboardAuthError, _auth_failed)
    app.add_middleware(DashboardHeaders)
