"""``/docs`` (Swagger UI) and ``/redoc`` served with no internet access.

FastAPI's own pages load their JavaScript and CSS from a CDN, so offline they are blank.
These pages load the same assets from the app itself, under :data:`ASSETS_URL`, from the
files the ``fastapi-offline`` package ships (Swagger UI, ReDoc, favicon), ReDoc is
told not to fetch Google fonts, and its bundle is served with its one CDN URL (the
Redocly logo in the menu) replaced by the local favicon, so neither page fetches
anything from outside.
"""

from __future__ import annotations

import functools
from pathlib import Path

import fastapi_offline
from fastapi import FastAPI, Request
from fastapi.openapi.docs import (
    get_redoc_html,
    get_swagger_ui_html,
    get_swagger_ui_oauth2_redirect_html,
)
from fastapi.responses import HTMLResponse, Response
from fastapi.staticfiles import StaticFiles

__all__ = ["ASSETS_DIR", "ASSETS_URL", "install_offline_docs"]

ASSETS_URL = "/docs-assets"
ASSETS_DIR = Path(fastapi_offline.__file__).parent / "static"
REDOC_JS_URL = "/docs-offline/redoc.standalone.js"
"""ReDoc's bundle with its one remote asset replaced (:func:`_redoc_without_cdn`)."""
REDOC_CDN_LOGO = "https://cdn.redoc.ly/redoc/logo-mini.svg"


@functools.cache
def _redoc_without_cdn() -> bytes:
    """ReDoc's bundle with the "API docs by Redocly" logo, the only asset it fetches from
    a CDN, pointed at the app's own favicon (a path relative to the ``/redoc`` page);
    read once per process."""
    bundle = (ASSETS_DIR / "redoc.standalone.js").read_bytes()
    local = f"{ASSETS_URL.lstrip('/')}/favicon.png".encode()
    return bundle.replace(REDOC_CDN_LOGO.encode(), local)


def install_offline_docs(
    app: FastAPI, *, docs_url: str = "/docs", redoc_url: str = "/redoc"
) -> None:
    """Serve the assets and both pages (the app must be created with ``docs_url=None``
    and ``redoc_url=None``)."""
    redoc_js = _redoc_without_cdn()

    @app.get(REDOC_JS_URL, include_in_schema=False)
    async def redoc_bundle() -> Response:
        return Response(
            redoc_js,
            media_type="text/javascript; charset=utf-8",
            headers={"Cache-Control": "public, max-age=86400"},
        )

    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS_DIR), name="docs-assets")
    redirect_url = f"{docs_url}/oauth2-redirect"

    def asset(request: Request, name: str) -> str:
        return f"{request.scope.get('root_path', '')}{ASSETS_URL}/{name}"

    # The endpoints read the app from the request, never from this closure: FastAPI caches
    # what it learns about every endpoint callable in module-level LRU caches (4,096 entries),
    # so a closure over ``app`` would keep every app a process ever built alive, with its
    # engine and its connection pool (the test suite builds hundreds).
    def openapi_url(request: Request) -> str:
        return f"{request.scope.get('root_path', '')}{request.app.openapi_url}"

    @app.get(docs_url, include_in_schema=False)
    async def swagger_ui(request: Request) -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url(request),
            title=f"{request.app.title} - Swagger UI",
            oauth2_redirect_url=redirect_url,
            swagger_js_url=asset(request, "swagger-ui-bundle.js"),
            swagger_css_url=asset(request, "swagger-ui.css"),
            swagger_favicon_url=asset(request, "favicon.png"),
        )

    @app.get(redirect_url, include_in_schema=False)
    async def swagger_ui_redirect() -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    @app.get(redoc_url, include_in_schema=False)
    async def redoc(request: Request) -> HTMLResponse:
        return get_redoc_html(
            openapi_url=openapi_url(request),
            title=f"{request.app.title} - ReDoc",
            redoc_js_url=f"{request.scope.get('root_path', '')}{REDOC_JS_URL}",
            redoc_favicon_url=asset(request, "favicon.png"),
            with_google_fonts=False,
        )
