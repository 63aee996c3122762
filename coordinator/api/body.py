"""The request-body guard: no body is read before its sender is authenticated, none is
parsed on the event loop, and the bodies held at once fit a memory budget.

A request to a route that takes a body (:class:`GuardedRoute`) goes through, in order:

1. :class:`RequestBodyGuard` (middleware): a ``Content-Length`` over ``max_body_bytes``
   is ``payload_too_large`` (413) at once, for every path; nothing is read.
2. The route's **gate** (:class:`BodyGate`, found among the route's dependencies): the
   credential the route needs is checked *before one byte of the body is received*: an
   admin or participant bearer token, a dashboard session; a caller without one gets
   401 (429 over the per-address failure limit) and its body is never read (the server
   discards it as it arrives). The routes that take a body from a caller without a token
   are few by design (``POST /v1/enroll``: its gate is the per-address enrollment limit;
   the dashboard's login form) and accept at most :data:`UNAUTHENTICATED_MAX_BODY`.
3. The **body budget** (:class:`BodyBudget`): the process holds at most
   ``body_budget_bytes`` of request bodies at once (reserved by ``Content-Length``, or
   the route's limit for a chunked body, until the response is ready); a request waits
   up to :data:`BUDGET_WAIT_S` for room, then gets ``server_busy`` (503).
4. The body is **read as it streams**: over the route's limit, 413 at once; a JSON body
   with more than :data:`~secfpp.wire.limits.MAX_JSON_TOKENS` structural characters
   (``"[]{},:``) is ``json_too_complex`` (422) at once, before it is parsed. Every
   Python object a JSON parse creates (container, string, number, key) starts at one of
   these characters, so the parsed document holds at most that many objects (a few MB)
   besides its strings (at most the body's size): 15 MiB of ``[],[],...`` no longer
   becomes five million lists.
5. In a **worker thread**: the media type (``unsupported_media_type``, 415), UTF-8,
   nesting (:func:`json_depth`), ``NaN``/``Infinity`` (``malformed_json``, 422), then one
   ``json.loads``. The parsed document is kept in the scope and handed to FastAPI
   (:class:`_GuardedRequest`): one parse per request.

So memory per request is bounded by a small multiple of its body (the bytes, the decoded
text, the parsed strings), and the bodies in flight by the budget; an unauthenticated
caller costs no memory beyond the server's socket buffers.

A route that takes no body (every ``GET``, ``POST .../rounds`` ...) never reads one.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine, MutableMapping
from dataclasses import dataclass
from typing import Any, TypeVar

import anyio
import numpy as np
from fastapi import Request, Response
from fastapi.dependencies.models import Dependant
from fastapi.routing import APIRoute
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from secfpp.coordinator.errors import ProblemError
from secfpp.wire.limits import MAX_JSON_DEPTH, MAX_JSON_TOKENS

__all__ = [
    "BUDGET_WAIT_S",
    "PARSED_JSON",
    "UNAUTHENTICATED_MAX_BODY",
    "BodyBudget",
    "BodyGate",
    "FormRoute",
    "GuardedRoute",
    "RequestBodyGuard",
    "body_gate_of",
    "inspect_body",
    "json_depth",
    "reads_body",
    "register_gate",
    "structural_count",
]

PARSED_JSON = "secfpp.parsed_json"
"""Key of the JSON document the guard parsed (only for a body it accepted)."""

UNAUTHENTICATED_MAX_BODY = 16 * 1024
"""Largest body a route takes without a credential (an enrollment request is < 2 KiB,
a dashboard form < 1 KiB)."""

BUDGET_WAIT_S = 10.0
"""Seconds a request waits for room in the body budget before ``server_busy``."""

PROBLEM_JSON = "application/problem+json"
_DELETE = bytes(b for b in range(256) if b not in b'"[]{}')
_STEP = np.zeros(256, dtype=np.int8)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1
_STRUCTURAL = tuple(bytes([c]) for c in b'"[]{},:')


def structural_count(chunk: bytes) -> int:
    """How many bytes of ``chunk`` are one of ``"[]{},:`` (seven ``bytes.count`` passes
    in C, no copy): a bound on the objects a JSON parse of the text creates, and on the
    bytes :func:`json_depth` keeps."""
    return sum(chunk.count(c) for c in _STRUCTURAL)


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
    """The problem of a body, or None when it may be used (then the parsed JSON
    document, if it is JSON, is stored in ``parsed[PARSED_JSON]``). Runs in a worker
    thread; the body's size and structural characters were bounded as it streamed."""
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


class BodyBudget:
    """At most ``total`` bytes of request bodies held at once, granted first come first
    served (a request never holds part of its share while waiting for the rest, so
    waiting cannot deadlock). One per app, used on its event loop only."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.used = 0
        self._waiting: deque[tuple[int, asyncio.Future[None]]] = deque()

    async def acquire(self, n: int, timeout_s: float = BUDGET_WAIT_S) -> int:
        """Reserve ``min(n, total)`` bytes (returned: what to :meth:`release`); wait up to
        ``timeout_s`` for room, then ``server_busy`` (503)."""
        n = min(n, self.total)
        if not self._waiting and self.used + n <= self.total:
            self.used += n
            return n
        entry = (n, asyncio.get_running_loop().create_future())
        self._waiting.append(entry)
        try:
            async with asyncio.timeout(timeout_s):
                await entry[1]
        except BaseException as err:
            if entry[1].done() and not entry[1].cancelled():
                self.release(n)  # granted just as the wait ended
            else:  # not granted; a release since the cancel may have passed it over
                with contextlib.suppress(ValueError):
                    self._waiting.remove(entry)
                self._grant()
            if isinstance(err, TimeoutError):
                raise ProblemError(
                    "server_busy",
                    f"too many request bodies are being read at once; retry in {timeout_s:g} s",
                    headers={"Retry-After": str(int(timeout_s))},
                ) from None
            raise
        return n

    def release(self, n: int) -> None:
        self.used -= n
        self._grant()

    def _grant(self) -> None:
        """Room to the waiters in order. A waiter whose future is already done was
        cancelled (its timeout or a disconnect cancels the future at once, its clean-up
        in :meth:`acquire` runs later): it is passed over, never granted, so no bytes are
        counted for a request that will not release them."""
        while self._waiting:
            n, future = self._waiting[0]
            if future.done():
                self._waiting.popleft()
                continue
            if self.used + n > self.total:
                return
            self._waiting.popleft()
            self.used += n
            future.set_result(None)


@dataclass(frozen=True)
class BodyGate:
    """What a route checks before reading a body: ``check(request)`` raises (401, 429,
    a dashboard redirect) for a caller who may not send one; ``max_bytes`` caps the
    body below ``max_body_bytes`` (None: no lower cap)."""

    check: Callable[[Request], Awaitable[None]]
    max_bytes: int | None = None


_GATES: dict[Any, BodyGate] = {}
_BODY_READERS: set[Any] = set()
F = TypeVar("F")


def register_gate(dependency: Any, gate: BodyGate) -> None:
    """Routes depending on ``dependency`` (a function or a security scheme instance)
    check ``gate`` before reading a body. Register before the routes are declared."""
    _GATES[dependency] = gate


def reads_body(dependency: F) -> F:
    """Mark a dependency that reads the request body itself (the route takes a body
    although FastAPI sees no body parameter)."""
    _BODY_READERS.add(dependency)
    return dependency


def _calls(dependant: Dependant) -> list[Any]:
    out: list[Any] = []
    for sub in dependant.dependencies:
        out.append(sub.call)
        out.extend(_calls(sub))
    return out


def body_gate_of(dependant: Dependant) -> BodyGate | None:
    """The gate of the first registered dependency of the route (depth first)."""
    return next((_GATES[c] for c in _calls(dependant) if _hashable(c) and c in _GATES), None)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True


def _too_large(limit: int) -> ProblemError:
    return ProblemError(
        "payload_too_large",
        f"request body exceeds the limit of {limit} bytes",
        headers={"Connection": "close"},
    )


def _content_length(headers: Headers) -> int | None:
    length = headers.get("content-length", "")
    return int(length) if length.isdigit() else None


def _has_body(headers: Headers) -> bool:
    length = _content_length(headers)
    return (length or 0) > 0 or "transfer-encoding" in headers


async def _read(request: Request, limit: int, max_tokens: int | None) -> bytes:
    """The body, refused as soon as it passes ``limit`` bytes or ``max_tokens``
    structural characters (None: not JSON, not counted)."""
    chunks: list[bytes] = []
    seen = tokens = 0
    try:
        async for chunk in request.stream():
            seen += len(chunk)
            if seen > limit:
                raise _too_large(limit)
            if max_tokens is not None:
                tokens += structural_count(chunk)
                if tokens > max_tokens:
                    raise ProblemError(
                        "json_too_complex",
                        f"the body has more than {max_tokens} JSON punctuation characters "
                        '("[]{},:); no operation takes that many values',
                        headers={"Connection": "close"},
                        max_tokens=max_tokens,
                    )
            if chunk:
                chunks.append(chunk)
    except ClientDisconnect:
        raise ProblemError("invalid_request", "the client went away during the body") from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


class RequestBodyGuard:
    """ASGI middleware: a declared ``Content-Length`` over ``max_bytes`` is answered 413
    before anything else runs; nothing is read here (see the module docstring)."""

    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            length = _content_length(Headers(scope=scope))
            if length is not None and length > self.max_bytes:
                await self._too_large(scope, send)
                return
        await self.app(scope, receive, send)

    async def _too_large(self, scope: Scope, send: Send) -> None:
        problem = _too_large(self.max_bytes)
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


Handler = Callable[[Request], Coroutine[Any, Any, Response]]


class GuardedRoute(APIRoute):
    """An API route whose body, if it takes one, is read by the guard: after its gate,
    within the budget, parsed once off the event loop (see the module docstring);
    validation and errors are FastAPI's as before."""

    form_body = False
    """True: the body is a form (``application/x-www-form-urlencoded``), read but not
    parsed by the guard."""

    @property
    def takes_body(self) -> bool:
        """Whether the route reads a body (a body parameter or a :func:`reads_body` one)."""
        return self.body_field is not None or any(
            _hashable(c) and c in _BODY_READERS for c in _calls(self.dependant)
        )

    @property
    def body_gate(self) -> BodyGate | None:
        """The check made before its body is read (None: at most
        :data:`UNAUTHENTICATED_MAX_BODY` from anyone)."""
        return body_gate_of(self.dependant)

    def get_route_handler(self) -> Handler:
        handler = super().get_route_handler()
        takes_body = self.takes_body
        gate = self.body_gate

        async def guarded(request: Request) -> Response:
            if takes_body and _has_body(request.headers):
                return await self._with_body(request, handler, gate)
            return await handler(_GuardedRequest(request.scope, request.receive))

        return guarded

    async def _with_body(
        self, request: Request, handler: Handler, gate: BodyGate | None
    ) -> Response:
        limit: int = request.app.state.settings.max_body_bytes
        cap = UNAUTHENTICATED_MAX_BODY if gate is None else gate.max_bytes
        if cap is not None:
            limit = min(limit, cap)
        length = _content_length(request.headers)
        if length is not None and length > limit:
            raise _too_large(limit)
        if gate is not None:
            await gate.check(request)  # before one byte of the body is received
        content_type = request.headers.get("content-type")
        parse = not self.form_body and is_json_media(content_type)
        budget: BodyBudget = request.app.state.body_budget
        held = await budget.acquire(limit if length is None else length)
        try:
            body = await _read(request, limit, MAX_JSON_TOKENS if parse else None)
            guarded = _GuardedRequest(request.scope, request.receive)
            guarded._body = body
            if not self.form_body:
                problem = await anyio.to_thread.run_sync(
                    inspect_body, content_type, body, MAX_JSON_DEPTH, request.scope
                )
                if problem is not None:
                    raise problem
            return await handler(guarded)
        finally:
            budget.release(held)


class FormRoute(GuardedRoute):
    """A :class:`GuardedRoute` whose body is an HTML form (the dashboard's)."""

    form_body = True
