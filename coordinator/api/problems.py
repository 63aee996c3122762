"""The one mapping from exceptions to problem documents, and the body-size limit."""

from __future__ import annotations

import json
import logging
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coordinator.errors import ProblemError, from_crypto_error
from crypto.errors import CryptoError

__all__ = ["PROBLEM_JSON", "BodySizeLimit", "install_problem_handlers", "problem_response"]

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
_CUSTOM_VALIDATION_CODES = {"malformed_base64"}


def problem_response(err: ProblemError, instance: str | None = None) -> JSONResponse:
    return JSONResponse(err.document(instance), status_code=err.status, media_type=PROBLEM_JSON)


def _validation_problem(exc: RequestValidationError) -> ProblemError:
    errors = [
        {"loc": list(e.get("loc", ())), "type": e.get("type"), "msg": e.get("msg")}
        for e in exc.errors()
    ]
    code = next(
        (str(e["type"]) for e in errors if e["type"] in _CUSTOM_VALIDATION_CODES),
        "invalid_request",
    )
    first = errors[0] if errors else {"loc": [], "msg": "invalid request"}
    detail = f"{'.'.join(str(p) for p in first['loc'])}: {first['msg']}"
    return ProblemError(code, detail, errors=errors)


def install_problem_handlers(app: FastAPI) -> None:
    """Every error leaves the API as ``application/problem+json`` with a stable code."""

    @app.exception_handler(ProblemError)
    async def _problem(request: Request, exc: ProblemError) -> JSONResponse:
        _count(request, exc.code)
        return problem_response(exc, request.url.path)

    @app.exception_handler(CryptoError)
    async def _crypto(request: Request, exc: CryptoError) -> JSONResponse:
        problem = from_crypto_error(exc)
        _count(request, problem.code)
        return problem_response(problem, request.url.path)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        problem = _validation_problem(exc)
        _count(request, problem.code)
        return problem_response(problem, request.url.path)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
            exc.status_code, "invalid_request"
        )
        return problem_response(ProblemError(code, str(exc.detail)), request.url.path)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return problem_response(ProblemError("internal_error", type(exc).__name__))


def _count(request: Request, code: str) -> None:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.inc("secfpp_upload_rejections_total", code=code)


class BodySizeLimit:
    """ASGI middleware: bodies over ``max_bytes`` get 413 ``payload_too_large``.

    Checks ``Content-Length`` up front and counts streamed chunks as they arrive, so a
    chunked body cannot get past the limit either.
    """

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        length = headers.get(b"content-length")
        if length is not None and length.isdigit() and int(length) > self.max_bytes:
            await self._reject(scope, send)
            return
        seen = 0
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    # An HTTPException passes FastAPI's body parsing unchanged (413).
                    raise StarletteHTTPException(413, self._problem().detail)
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except StarletteHTTPException:
            if not started:
                await self._reject(scope, send)

    def _problem(self) -> ProblemError:
        return ProblemError(
            "payload_too_large", f"request body exceeds the limit of {self.max_bytes} bytes"
        )

    async def _reject(self, scope: Scope, send: Send) -> None:
        problem = self._problem()
        body = json.dumps(problem.document(scope.get("path"))).encode()
        headers: list[Any] = [
            (b"content-type", PROBLEM_JSON.encode()),
            (b"content-length", str(len(body)).encode()),
        ]
        await send({"type": "http.response.start", "status": 413, "headers": headers})
        await send({"type": "http.response.body", "body": body})
