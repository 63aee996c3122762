"""The request-body guard: size, encoding and JSON nesting, checked before any parsing.

:class:`RequestBodyGuard` (ASGI middleware) reads the body first:

* over ``max_bytes`` (by ``Content-Length`` or as it streams): 413
  ``payload_too_large`` at once, before anything else runs;
* a JSON body (``application/json``, ``*+json``, or no content type) that is not UTF-8,
  nests deeper than ``max_depth``, uses ``NaN``/``Infinity`` or is not JSON at all:
  ``malformed_json`` (422);
* any other content type than JSON or ``application/octet-stream``:
  ``unsupported_media_type`` (415).

The last two are *deferred*: the problem is stored in the request scope and the body
replaced by ``[]`` (which no operation accepts), so authentication still runs first
and a caller without a valid token gets 401, never a hint about the body. The
validation handler (:mod:`coordinator.api.problems`) and :func:`raise_body_problem`
(for routes that read the body themselves) answer with the stored problem.

The nesting check scans the raw bytes (:func:`json_depth`, vectorized), so a body
nested 50,000 deep never reaches a recursive parser.

The guard parses every JSON body it accepts, so it keeps the parsed document in the
scope; routes of :class:`GuardedRoute` hand it to FastAPI instead of parsing the body
a second time (a share upload is about 1 MB of JSON).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Coroutine, MutableMapping
from typing import Any

import numpy as np
from fastapi import Request, Response
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from coordinator.errors import ProblemError
from coordinator.limits import MAX_JSON_DEPTH

__all__ = [
    "BODY_PROBLEM",
    "PARSED_JSON",
    "GuardedRoute",
    "RequestBodyGuard",
    "json_depth",
    "raise_body_problem",
]

BODY_PROBLEM = "secfpp.body_problem"
"""Key of the deferred body problem in the ASGI scope."""
PARSED_JSON = "secfpp.parsed_json"
"""Key of the JSON document the guard parsed (only for a body it accepted)."""

PROBLEM_JSON = "application/problem+json"
_DELETE = bytes(b for b in range(256) if b not in b'"[]{}')
_STEP = np.zeros(256, dtype=np.int8)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1


def json_depth(body: bytes) -> int:
    """Deepest nesting of arrays and objects in the JSON text ``body`` (0 for a scalar).

    Brackets inside string literals do not count: escaped backslashes, then escaped
    quotes are removed (JSON escapes read left to right, so this pairs them as a parser
    would), every byte but ``"[]{}`` is dropped, and of what is left only the parts
    between string literals (even-numbered pieces between quotes) are kept; the depth
    is the running maximum of +1 per opening and -1 per closing bracket. Everything runs
    in C or NumPy. For malformed text the result bounds what a parser would reach.

    Cost: one pass (``translate``) over a body without backslashes (the escape removal,
    two copies of the body, runs only when there is one), about 1 ms per MB.
    """
    if b"\\" in body:
        body = body.replace(b"\\\\", b"").replace(b'\\"', b"")
    kept = body.translate(None, _DELETE)
    if b"[" not in kept and b"{" not in kept:
        return 0
    brackets = b"".join(kept.split(b'"')[::2])
    steps = _STEP[np.frombuffer(brackets, dtype=np.uint8)]
    return int(np.cumsum(steps, dtype=np.int32).max(initial=0))


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def is_json_media(content_type: str | None) -> bool:
    media = _media_type(content_type)
    return media in ("", "application/json") or (
        media.startswith("application/") and media.endswith("+json")
    )


def inspect_body(
    content_type: str | None,
    body: bytes,
    max_depth: int,
    parsed: MutableMapping[str, Any] | None = None,
) -> ProblemError | None:
    """The deferred problem of a body, or None when it may be parsed (then the parsed
    JSON document, if it is JSON, is stored in ``parsed[PARSED_JSON]``)."""
    if not body:
        return None
    if not is_json_media(content_type):
        if _media_type(content_type) == "application/octet-stream":
            return None
        return ProblemError(
            "unsupported_media_type",
            f"content type {_media_type(content_type)!r} is not accepted; send application/json",
        )
    depth = json_depth(body)
    if depth > max_depth:
        return ProblemError(
            "malformed_json",
            f"the body nests {depth} levels deep; at most {max_depth} are accepted",
            max_depth=max_depth,
        )
    try:
        document = json.loads(body.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError as err:
        return ProblemError("malformed_json", f"the body is not UTF-8 (byte {err.start})")
    except (ValueError, RecursionError) as err:
        return ProblemError("malformed_json", f"the body is not JSON: {err}")
    if parsed is not None:
        parsed[PARSED_JSON] = document
    return None


def raise_body_problem(request: Request) -> None:
    """Raise the body's deferred problem, if any (for routes that read the body)."""
    problem = request.scope.get(BODY_PROBLEM)
    if isinstance(problem, ProblemError):
        raise problem


class RequestBodyGuard:
    """ASGI middleware; see the module docstring."""

    def __init__(self, app: ASGIApp, max_bytes: int, max_depth: int = MAX_JSON_DEPTH) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_depth = max_depth

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        length = headers.get("content-length", "")
        if length.isdigit() and int(length) > self.max_bytes:
            await self._too_large(scope, send)
            return
        chunks: list[bytes] = []
        seen = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before sending its body
            chunk = message.get("body", b"")
            seen += len(chunk)
            if seen > self.max_bytes:
                await self._too_large(scope, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        problem = inspect_body(headers.get("content-type"), body, self.max_depth, scope)
        if problem is not None:
            scope[BODY_PROBLEM] = problem
            if problem.code == "malformed_json":
                body = b"[]"
        await self.app(scope, _replay(body, receive), send)

    async def _too_large(self, scope: Scope, send: Send) -> None:
        problem = ProblemError(
            "payload_too_large", f"request body exceeds the limit of {self.max_bytes} bytes"
        )
        content = json.dumps(problem.document(scope.get("path"))).encode()
        await send(
            {
                "type": "http.response.start",
                "status": problem.status,
                "headers": [
                    (b"content-type", PROBLEM_JSON.encode()),
                    (b"content-length", str(len(content)).encode()),
                    (b"connection", b"close"),
                ],
            }
        )
        await send({"type": "http.response.body", "body": content})


class _GuardedRequest(Request):
    """A request whose JSON is the document the guard already parsed (if it did)."""

    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            if PARSED_JSON in self.scope:
                self._json = self.scope[PARSED_JSON]
            else:
                self._json = json.loads(await self.body())
        return self._json


class GuardedRoute(APIRoute):
    """An API route that takes the request's JSON from :class:`RequestBodyGuard` (one
    parse per request instead of two); validation and errors are FastAPI's as before."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def guarded(request: Request) -> Response:
            return await handler(_GuardedRequest(request.scope, request.receive))

        return guarded


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that hands over ``body`` once, then passes on (disconnects)."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
