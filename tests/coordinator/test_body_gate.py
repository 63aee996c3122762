"""No request body is received, let alone parsed, before its sender is authenticated.

The attack (issue 26, item 6): unauthenticated bodies of 15 MiB of empty arrays were read
and parsed in the event loop before the token was checked, so a few of them took the
coordinator to gigabytes and stalled ``/healthz``. These tests drive the ASGI app with a
``receive`` that counts what the app takes from the client: a caller without a valid
credential must get its 401 with nothing received. The memory and latency figures are
measured by ``bench/load/body_memory.py`` (real uvicorn, real HTTP), not here.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from secfpp.coordinator.api import body as body_module
from secfpp.coordinator.api.body import (
    UNAUTHENTICATED_MAX_BODY,
    BodyBudget,
    GuardedRoute,
    structural_count,
)
from secfpp.coordinator.app import create_app
from secfpp.coordinator.errors import ProblemError
from secfpp.wire.limits import MAX_JSON_TOKENS
from tests.support.asgi import TestClient
from tests.support.common import ADMIN, FakeClock
from tests.support.coordinator import make_settings

CHUNK = 64 * 1024
EMPTY_ARRAYS = b"[" + b"[]," * (CHUNK // 3 - 1) + b"[]"  # one chunk of the attack's body


class Exchange:
    """One request played against the app through raw ASGI; counts body chunks taken."""

    def __init__(self, client: TestClient) -> None:
        self.client = client
        self.received = 0
        self.status = 0
        self.body = b""

    def run(self, method: str, path: str, headers: dict[str, str], chunks: list[bytes]) -> Exchange:
        pending = list(chunks)

        async def receive() -> dict[str, Any]:
            if pending:
                self.received += 1
                chunk = pending.pop(0)
                return {"type": "http.request", "body": chunk, "more_body": bool(pending)}
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                self.status = message["status"]
            elif message["type"] == "http.response.body":
                self.body += message.get("body", b"")

        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "root_path": "",
            "headers": [(k.lower().encode(), v.encode()) for k, v in headers.items()],
            "client": ("127.0.0.1", 40000),
            "server": ("testserver", 80),
            "state": {},
        }

        async def call() -> None:
            await self.client.app(scope, receive, send)

        assert self.client.portal is not None
        self.client.portal.call(call)
        return self

    def problem(self) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(self.body)
        return doc


def _declared(n_chunks: int, **headers: str) -> dict[str, str]:
    return {
        "Content-Type": "application/json",
        "Content-Length": str(n_chunks * len(EMPTY_ARRAYS)),
        **headers,
    }


WRONG = {"Authorization": "Bearer sfa_not-a-token"}
WRONG_PARTICIPANT = {"Authorization": "Bearer sfp_not-a-token"}
BODY_ROUTES = [
    ("POST", "/v1/federations"),
    ("POST", "/v1/admin/tokens"),
    ("POST", "/v1/participants/me/rounds/1/shares"),
    ("POST", "/v1/participants/me/rounds/1/results/distances"),
    ("POST", "/v1/participants/me/rounds/1/refusals"),
    ("POST", "/v1/participants/me/rounds/1/metrics"),
]


@pytest.mark.parametrize(("method", "path"), BODY_ROUTES)
@pytest.mark.parametrize(
    "credentials", [{}, WRONG, WRONG_PARTICIPANT], ids=["none", "admin-like", "participant-like"]
)
def test_an_unauthenticated_body_is_never_received(
    client: TestClient, method: str, path: str, credentials: dict[str, str]
) -> None:
    chunks = [EMPTY_ARRAYS] * 3
    ex = Exchange(client).run(method, path, _declared(len(chunks), **credentials), chunks)
    assert ex.status == 401, ex.body
    assert ex.problem()["code"] == "invalid_token"
    assert ex.received == 0


def test_a_chunked_unauthenticated_body_is_never_received(client: TestClient) -> None:
    headers = {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
    ex = Exchange(client).run("POST", "/v1/federations", headers, [EMPTY_ARRAYS] * 3)
    assert (ex.status, ex.received) == (401, 0)


def test_a_participant_token_opens_no_admin_body(harness: Any) -> None:
    sim = harness.sims[0]
    ex = Exchange(harness.client).run(
        "POST", "/v1/federations", _declared(2, **sim.headers), [EMPTY_ARRAYS] * 2
    )
    assert (ex.status, ex.received) == (401, 0)


def test_a_dashboard_form_needs_a_session_first(client: TestClient) -> None:
    path = "/dashboard/federations/f/participants/p/revoke"
    headers = {"Content-Type": "application/x-www-form-urlencoded", "Content-Length": "9"}
    ex = Exchange(client).run("POST", path, headers, [b"csrf=abcd"])
    assert ex.status in (303, 401)
    assert ex.received == 0


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The threads in which the guard parsed a body, one entry per parse."""
    threads: list[int] = []
    inspect = body_module.inspect_body

    def recorded(*args: Any) -> Any:
        threads.append(threading.get_ident())
        return inspect(*args)

    monkeypatch.setattr(body_module, "inspect_body", recorded)
    return threads


def test_nothing_is_parsed_for_an_unauthenticated_caller(
    client: TestClient, parses: list[int]
) -> None:
    body = b"[" + b"[]," * 60_000 + b"[]]"
    for path in ("/v1/federations", "/v1/participants/me/rounds/1/shares"):
        r = client.post(path, content=body, headers={"Content-Type": "application/json"})
        assert r.status_code == 401
    assert parses == []
    r = client.post("/v1/federations", json={"name": "x", "n_participants": 4}, headers=ADMIN)
    assert r.status_code == 201, r.text
    assert len(parses) == 1  # a valid caller's body: parsed once


def test_the_json_is_parsed_off_the_event_loop(client: TestClient, parses: list[int]) -> None:
    threads = parses
    r = client.post("/v1/federations", json={"name": "x", "n_participants": 4}, headers=ADMIN)
    assert r.status_code == 201, r.text
    assert client.portal is not None
    loop_thread = client.portal.call(threading.get_ident)
    assert len(threads) == 1
    assert threads[0] != loop_thread


def test_enrollment_bodies_are_small_and_rate_limited_before_reading(
    client: TestClient,
) -> None:
    over = UNAUTHENTICATED_MAX_BODY + 1
    headers = {"Content-Type": "application/json", "Content-Length": str(over)}
    ex = Exchange(client).run("POST", "/v1/enroll", headers, [b" " * over])
    assert (ex.status, ex.received) == (413, 0)
    assert ex.problem()["code"] == "payload_too_large"
    # streamed without a length: refused once the limit is passed, the rest never read
    chunked = {"Content-Type": "application/json", "Transfer-Encoding": "chunked"}
    ex = Exchange(client).run("POST", "/v1/enroll", chunked, [b" " * 8192] * 10)
    assert ex.status == 413
    assert ex.received == 3


def test_an_address_over_the_failure_limit_sends_no_body(db_url: str) -> None:
    """The limit on authentication failures answers before the body too (429)."""
    settings = make_settings(db_url, auth_failure_limit=1, auth_failure_window_s=60)
    with TestClient(create_app(settings, clock=FakeClock())) as limited:
        chunks = [EMPTY_ARRAYS] * 2
        ex = Exchange(limited).run("POST", "/v1/federations", _declared(2, **WRONG), chunks)
        assert (ex.status, ex.received) == (401, 0)
        ex = Exchange(limited).run("POST", "/v1/federations", _declared(2, **ADMIN), chunks)
        assert (ex.status, ex.received) == (429, 0)
        assert ex.problem()["code"] == "rate_limited"


@pytest.fixture
def roomy(db_url: str) -> Iterator[TestClient]:
    """A coordinator that accepts bodies of 8 MiB, within a budget of 16 MiB."""
    settings = make_settings(db_url, max_body_bytes=8 * 2**20, body_budget_bytes=16 * 2**20)
    with TestClient(create_app(settings, clock=FakeClock())) as test_client:
        yield test_client


def test_a_valid_caller_cannot_send_millions_of_values(roomy: TestClient) -> None:
    chunks = [EMPTY_ARRAYS] * 64  # 4 MiB: 4.2 million punctuation characters
    ex = Exchange(roomy).run("POST", "/v1/federations", _declared(len(chunks), **ADMIN), chunks)
    assert ex.status == 422, ex.body
    assert ex.problem()["code"] == "json_too_complex"
    assert ex.problem()["max_tokens"] == MAX_JSON_TOKENS
    # refused as soon as the bound was passed: the rest of the body was never taken
    assert ex.received == MAX_JSON_TOKENS // len(EMPTY_ARRAYS) + 1
    assert roomy.app.state.body_budget.used == 0  # type: ignore[attr-defined]


def test_a_large_valid_body_is_still_read_and_parsed(roomy: TestClient) -> None:
    padding = "x" * (3 * 2**20)  # a long string: few values, many bytes
    r = roomy.post(
        "/v1/federations",
        json={"name": "x", "n_participants": 4, "padding": padding},
        headers=ADMIN,
    )
    assert r.status_code == 422, r.text
    assert r.json()["code"] == "invalid_request"  # parsed, then refused by the schema
    assert roomy.app.state.body_budget.used == 0  # type: ignore[attr-defined]


def every_route(routes: list[Any]) -> Iterator[Any]:
    """The app's routes, those of included routers too (FastAPI keeps them there)."""
    for route in routes:
        if hasattr(route, "original_router"):
            yield from every_route(route.original_router.routes)
        else:
            yield route


def test_every_route_that_takes_a_body_is_guarded(client: TestClient) -> None:
    ungated: set[str] = set()
    gated = 0
    for route in every_route(client.app.routes):  # type: ignore[attr-defined]
        methods = getattr(route, "methods", None) or set()
        if not methods - {"GET", "HEAD"}:
            continue
        assert isinstance(route, GuardedRoute), route.path
        if route.takes_body and route.body_gate is None:
            ungated.add(route.path)
        gated += route.takes_body and route.body_gate is not None
    assert gated >= 10  # federations, tokens, enrollment, uploads, refusals, metrics, forms
    # taken from anyone by design, at most UNAUTHENTICATED_MAX_BODY: the dashboard's
    # login form and one-time link (enrollment is gated by its rate limit)
    assert ungated <= {"/dashboard/login", "/dashboard/link"}, ungated


def test_structural_count_known_answers() -> None:
    assert structural_count(b"") == 0
    assert structural_count(b'{"a": [1, 2], "b": "x"}') == 14
    assert structural_count(b"AAAA" * 1000) == 0
    assert structural_count(EMPTY_ARRAYS) == len(EMPTY_ARRAYS)


def test_the_budget_is_first_come_first_served_and_times_out() -> None:
    async def scenario() -> list[str]:
        budget = BodyBudget(100)
        order: list[str] = []
        assert await budget.acquire(500) == 100  # never more than the total
        budget.release(100)
        assert await budget.acquire(60) == 60

        async def take(name: str, n: int) -> None:
            held = await budget.acquire(n, timeout_s=5)
            order.append(name)
            await asyncio.sleep(0.01)
            budget.release(held)

        first = asyncio.create_task(take("big", 90))
        await asyncio.sleep(0)
        second = asyncio.create_task(take("small", 10))  # would fit, but waits its turn
        await asyncio.sleep(0)
        assert order == []
        budget.release(60)
        await asyncio.gather(first, second)
        assert budget.used == 0
        # a request that never gets room is told so, and leaves nothing held
        await budget.acquire(100)
        with pytest.raises(ProblemError) as info:
            await budget.acquire(1, timeout_s=0.01)
        assert info.value.code == "server_busy"
        assert info.value.status == 503
        budget.release(100)
        assert await budget.acquire(1) == 1
        return order

    assert asyncio.run(scenario()) == ["big", "small"]


def test_a_waiter_cancelled_just_before_room_is_released_holds_nothing() -> None:
    """Its timeout (or a disconnect) cancels the waiter's future at once, but its own
    clean-up runs later: a release in between must pass it over, not grant it (that
    raised InvalidStateError in the releasing request and leaked the bytes forever, so
    that a 1,000-participant upload burst ended with every upload answered 503), and
    the waiter's clean-up must then find nothing to remove (it raised ValueError: 500)."""

    async def scenario() -> None:
        budget = BodyBudget(100)
        held = await budget.acquire(100)
        waiter = asyncio.create_task(budget.acquire(60, timeout_s=5))
        behind = asyncio.create_task(budget.acquire(40, timeout_s=5))
        await asyncio.sleep(0)  # both wait for room
        waiter.cancel()  # its future is cancelled now; its except block runs later
        budget.release(held)
        with pytest.raises(asyncio.CancelledError):
            await waiter
        assert await behind == 40  # the one behind it got room
        assert budget.used == 40
        budget.release(40)
        assert budget.used == 0
        assert await budget.acquire(100) == 100  # nothing leaked

    asyncio.run(scenario())
