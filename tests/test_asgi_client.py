"""The suite's one-hop ``TestClient`` (tests/support/asgi.py) gives the app and the test
exactly what Starlette's client gives them: the same request, the same response, the same
errors; only the number of thread hops differs."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.responses import PlainTextResponse, StreamingResponse
from starlette.testclient import TestClient as StarletteTestClient

from tests.support.asgi import TestClient


def _app() -> FastAPI:
    app = FastAPI()

    @app.post("/echo")
    async def echo(request: Request) -> dict[str, Any]:
        return {
            "body": (await request.body()).decode(),
            "query": dict(request.query_params),
            "path": request.url.path,
            "raw_path": request.scope["raw_path"].decode(),
            "x": request.headers.getlist("x-many"),
            "host": request.headers["host"],
            "client": list(request.client or ()),
        }

    @app.get("/stream")
    async def stream() -> StreamingResponse:
        async def parts() -> AsyncIterator[bytes]:
            for i in range(3):
                await asyncio.sleep(0)
                yield f"part{i};".encode()

        return StreamingResponse(parts(), media_type="text/plain")

    @app.get("/boom")
    def boom() -> None:
        raise RuntimeError("the app failed")

    @app.get("/cookie")
    def cookie() -> PlainTextResponse:
        response = PlainTextResponse("set")
        response.set_cookie("session", "abc")
        return response

    @app.get("/cookie/read")
    def cookie_read(request: Request) -> PlainTextResponse:
        return PlainTextResponse(request.cookies.get("session", "none"))

    @app.get("/redirect")
    def redirect() -> PlainTextResponse:
        return PlainTextResponse("", status_code=307, headers={"location": "/cookie/read"})

    return app


@pytest.mark.parametrize("client_class", [TestClient, StarletteTestClient])
def test_requests_and_responses_match_starlettes_client(client_class: type) -> None:
    with client_class(_app()) as client:
        r = client.post(
            "/echo?a=1&b=%20two",
            content=b"payload \xc3\xa9",
            headers=[("x-many", "1"), ("x-many", "2")],
        )
        assert r.status_code == 200
        assert r.json() == {
            "body": "payload é",
            "query": {"a": "1", "b": " two"},
            "path": "/echo",
            "raw_path": "/echo",
            "x": ["1", "2"],
            "host": "testserver",
            "client": ["testclient", 50000],
        }
        streamed = client.get("/stream")
        assert streamed.text == "part0;part1;part2;"
        assert streamed.headers["content-type"].startswith("text/plain")
        assert client.head("/stream").content == b""
        assert client.get("/cookie").text == "set"
        assert client.get("/cookie/read").text == "abc"  # the cookie came back
        followed = client.get("/redirect")
        assert followed.text == "abc"
        assert [h.status_code for h in followed.history] == [307]
        assert client.get("/missing").status_code == 404


@pytest.mark.parametrize("client_class", [TestClient, StarletteTestClient])
def test_an_app_exception_is_raised_or_becomes_a_500(client_class: type) -> None:
    with client_class(_app()) as client, pytest.raises(RuntimeError, match="the app failed"):
        client.get("/boom")
    with client_class(_app(), raise_server_exceptions=False) as client:
        r = client.get("/boom")
        assert r.status_code == 500


def test_without_a_with_block_each_request_gets_its_own_portal() -> None:
    client = TestClient(_app())
    assert client.post("/echo", content=b"x").json()["body"] == "x"
    assert client.get("/stream").text == "part0;part1;part2;"
