"""The one mapping from exceptions to problem documents (RFC 9457).

* :class:`~coordinator.errors.ProblemError` and core errors: their code's status;
* request validation: 422 ``invalid_request`` (or ``malformed_base64``); a body the
  guard (:mod:`coordinator.api.body`) refused never gets this far;
* Starlette's HTTP errors: 404 ``not_found``, 405 ``method_not_allowed`` with an
  ``Allow`` header listing every method the path takes, 413 ``payload_too_large``;
* database errors caused by the input (``DataError``: a value the column cannot hold,
  ``IntegrityError``: a constraint, ``OverflowError``: an integer the driver cannot
  bind): 422 ``value_out_of_range`` and 409 ``conflict``; nothing was stored, since
  the request's transaction is rolled back;
* anything else: 500 ``internal_error`` (logged with its traceback).

Every 401 carries ``WWW-Authenticate: Bearer`` (RFC 6750).
"""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from sqlalchemy import exc as sa_exc
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match
from starlette.types import Scope

from secfpp.coordinator.errors import ProblemError, from_crypto_error
from secfpp.crypto.errors import CryptoError

__all__ = ["BEARER_CHALLENGE", "PROBLEM_JSON", "install_problem_handlers", "problem_response"]

log = logging.getLogger(__name__)

PROBLEM_JSON = "application/problem+json"
BEARER_CHALLENGE = 'Bearer realm="secfpp"'
_CUSTOM_VALIDATION_CODES = {"malformed_base64"}


def problem_response(err: ProblemError, instance: str | None = None) -> JSONResponse:
    headers = dict(err.headers)
    if err.status == 401:
        headers.setdefault("WWW-Authenticate", BEARER_CHALLENGE)
    return JSONResponse(
        err.document(instance),
        status_code=err.status,
        media_type=PROBLEM_JSON,
        headers=headers or None,
    )


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


HTTP_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


def allowed_methods(app: FastAPI, scope: Scope) -> list[str]:
    """Every method some route of ``app`` fully matches on the request's path (for the
    ``Allow`` header; routes of included routers are matched through their router)."""
    return [
        method
        for method in HTTP_METHODS
        if any(
            route.matches({**scope, "method": method})[0] == Match.FULL
            for route in app.router.routes
        )
    ]


def _http_problem(request: Request, exc: StarletteHTTPException) -> ProblemError:
    code = {404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}.get(
        exc.status_code, "invalid_request"
    )
    headers = dict(exc.headers or {})
    if exc.status_code == 405:
        headers["Allow"] = ", ".join(allowed_methods(request.app, request.scope))
    return ProblemError(code, str(exc.detail), headers=headers)


def _database_problem(exc: Exception) -> ProblemError:
    # The driver's message may quote the statement's parameters (tokens' hashes,
    # ciphertexts): log and answer with the exception's type only.
    log.warning("input rejected by the database: %s", type(exc).__name__)
    if isinstance(exc, sa_exc.IntegrityError):
        return ProblemError("conflict", "the request conflicts with stored state")
    return ProblemError(
        "value_out_of_range", "a value in the request is outside what the database can store"
    )


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
        return problem_response(_http_problem(request, exc), request.url.path)

    async def _database(request: Request, exc: Exception) -> JSONResponse:
        problem = _database_problem(exc)
        _count(request, problem.code)
        return problem_response(problem, request.url.path)

    for kind in (sa_exc.DataError, sa_exc.IntegrityError, OverflowError):
        app.add_exception_handler(kind, _database)

    @app.exception_handler(Exception)
    async def _internal(request: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error on %s", request.url.path)
        return problem_response(ProblemError("internal_error", type(exc).__name__))


def _count(request: Request, code: str) -> None:
    metrics = getattr(request.app.state, "metrics", None)
    if metrics is not None:
        metrics.inc("secfpp_upload_rejections_total", code=code)
