"""The suite's in-process HTTP client: Starlette's ``TestClient`` with one thread hop a request.

Starlette's ``TestClient`` runs the app on a blocking portal (an event loop in another
thread) and streams each response back: every request makes about eight round trips
between the test's thread and the portal's (events, a memory stream, a cancel scope, the
app task, one per body chunk). Measured on the 2-core machine: 2.2 ms for ``GET /healthz``
of which nearly all is those hops, and about a fifth of the busy CPU samples of the
committee tests sat in the portal's wake-ups (``_write_to_self``, ``Condition.notify``).

:class:`TestClient` keeps everything of Starlette's client (lifespan on ``with``, the
portal, cookies, redirects, websockets) and replaces only how an HTTP request reaches the
app: the whole ASGI exchange (``http.request`` in, ``http.response.start`` and every
``http.response.body`` out) runs as **one** coroutine on the portal, which returns the
status, headers and complete body. Nothing the app sees differs: the same scope keys, the
body in one ``http.request`` message, ``http.disconnect`` only after the response is
complete (a ``StreamingResponse`` listening for it keeps streaming). What differs for the
test: the body arrives whole, never streamed, which no test of this suite needs (none
reads an endless stream).

Errors follow Starlette's client: with ``raise_server_exceptions`` (the default) an
exception the app raises is raised in the test; without it, a request whose response never
started gets an empty 500, and one that started gets what was sent.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import unquote

import anyio
import httpx2
from starlette.testclient import TestClient as StarletteTestClient
from starlette.testclient import _TestClientTransport
from starlette.types import Message

__all__ = ["TestClient"]


class _OneHopTransport(_TestClientTransport):
    """HTTP requests in one portal call; websocket upgrades as Starlette's transport."""

    def handle_request(self, request: httpx2.Request) -> httpx2.Response:
        if request.url.scheme not in ("http", "https"):
            return super().handle_request(request)
        body = request.read()
        scope = self._http_scope(request)
        with self.portal_factory() as portal:
            status, headers, chunks, error = portal.call(self._exchange, scope, body)
        if error is not None and self.raise_server_exceptions:
            raise error
        if status is None:
            if self.raise_server_exceptions:
                raise AssertionError("TestClient did not receive any response.")
            status, headers, chunks = 500, [], []
        return httpx2.Response(
            status_code=status,
            headers=headers,
            stream=httpx2.ByteStream(b"" if request.method == "HEAD" else b"".join(chunks)),
            request=request,
        )

    def _http_scope(self, request: httpx2.Request) -> dict[str, Any]:
        url = request.url
        port = url.port or {"http": 80, "https": 443}[url.scheme]
        headers = [(k.lower().encode(), v.encode()) for k, v in request.headers.multi_items()]
        if "host" not in request.headers:
            headers.insert(0, (b"host", url.netloc))
        return {
            "type": "http",
            "http_version": "1.1",
            "method": request.method,
            "path": unquote(url.path),
            "raw_path": url.raw_path.split(b"?", 1)[0],
            "root_path": self.root_path,
            "scheme": url.scheme,
            "query_string": url.query,
            "headers": headers,
            "client": self.client,
            "server": [url.raw_host.decode("ascii"), port],
            "extensions": {"http.response.debug": {}},
            "state": self.app_state.copy(),
        }

    async def _exchange(
        self, scope: dict[str, Any], body: bytes
    ) -> tuple[int | None, list[tuple[str, str]], list[bytes], BaseException | None]:
        """Run the app on one request to the end: (status, headers, body chunks, error)."""
        sent_request = False
        complete = anyio.Event()
        status: int | None = None
        headers: list[tuple[str, str]] = []
        chunks: list[bytes] = []

        async def receive() -> Message:
            nonlocal sent_request
            if not sent_request:
                sent_request = True
                return {"type": "http.request", "body": body, "more_body": False}
            await complete.wait()
            return {"type": "http.disconnect"}

        async def send(message: Message) -> None:
            nonlocal status, headers
            kind = message["type"]
            if kind == "http.response.start":
                assert status is None, 'Received multiple "http.response.start" messages.'
                status = int(message["status"])
                headers = [(k.decode(), v.decode()) for k, v in message.get("headers", [])]
            elif kind == "http.response.body":
                assert status is not None, '"http.response.body" before "http.response.start".'
                assert not complete.is_set(), '"http.response.body" after the response completed.'
                chunks.append(bytes(message.get("body", b"")))
                if not message.get("more_body", False):
                    complete.set()

        error: BaseException | None = None
        try:
            await self.app(scope, receive, send)
        except Exception as exc:  # handed to the caller, as Starlette's client does
            error = exc
        finally:
            complete.set()
        return status, headers, chunks, error


class TestClient(StarletteTestClient):
    """Starlette's ``TestClient`` whose HTTP requests take one thread hop (module docstring)."""

    __test__ = False

    def __init__(self, app: Any, *args: Any, **kwargs: Any) -> None:
        super().__init__(app, *args, **kwargs)
        old = self._transport
        assert isinstance(old, _TestClientTransport)
        self._transport = _OneHopTransport(
            old.app,
            portal_factory=old.portal_factory,
            raise_server_exceptions=old.raise_server_exceptions,
            root_path=old.root_path,
            client=old.client,
            app_state=old.app_state,
        )
