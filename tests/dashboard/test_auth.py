"""Dashboard authentication: no data without an admin session, on every page.

The table :data:`PAGES` names every dashboard route; a test checks that the app has no
dashboard route missing from it, so a new page cannot ship without its auth test.
"""

from __future__ import annotations

from typing import Any

import pytest
from starlette.routing import Route

from secfpp.coordinator.app import create_app
from secfpp.coordinator.auth.dashboard_sessions import COOKIE, SESSION_TTL_S
from secfpp.coordinator.dashboard.routes import FRAGMENTS, router
from tests.support.asgi import TestClient
from tests.support.common import ADMIN, ADMIN_TOKEN, FakeClock
from tests.support.coordinator import FederationHarness, make_settings
from tests.support.dashboard import FORM, csrf_of, login
from tests.support.frozen import FrozenFederations, copied_database, enrolled

# ``harness`` (8 participants enrolled) is built once per backend and session and copied into
# each test's database (tests/support/frozen.py; enrolling cost 0.3-0.5 s of CPU per test),
# so the module runs on one worker.
pytestmark = pytest.mark.xdist_group("dashboard_auth")


FROZEN = {"harness": enrolled}


db_url = copied_database(FROZEN)


@pytest.fixture
def harness(client: TestClient, backend: str, frozen: FrozenFederations) -> FederationHarness:
    """A federation of N = 8 simulated participants on :func:`client`, all enrolled."""
    h: FederationHarness = frozen.built(enrolled, backend).twin(client)
    return h


# (method, path template, needs a session)
PAGES = [
    ("GET", "/dashboard", False),
    ("GET", "/dashboard/login", False),
    ("POST", "/dashboard/login", False),
    ("GET", "/dashboard/link", False),
    ("POST", "/dashboard/link", False),
    ("POST", "/dashboard/logout", True),
    ("GET", "/dashboard/", True),
    ("GET", "/dashboard/federations/{federation_id}", True),
    ("GET", "/dashboard/federations/{federation_id}/timeline", True),
    ("GET", "/dashboard/federations/{federation_id}/sections", True),
    ("GET", "/dashboard/federations/{federation_id}/status", True),
    ("GET", "/dashboard/federations-table", True),
    ("POST", "/dashboard/federations/{federation_id}/{action}", True),
    ("GET", "/dashboard/federations/{federation_id}/participants", True),
    ("GET", "/dashboard/federations/{federation_id}/participants/{participant_id}/{action}", True),
    ("POST", "/dashboard/federations/{federation_id}/participants/{participant_id}/{action}", True),
]


def _fill(path: str, h: Any) -> str:
    return path.format(
        federation_id=h.id, participant_id=h.sims[-1].participant_id, action="revoke"
    )


def test_every_dashboard_route_is_in_the_table(client: TestClient) -> None:
    routes = {
        (method, route.path)
        for route in router.routes
        if isinstance(route, Route)
        for method in (route.methods or set()) - {"HEAD"}
    }
    assert client.get("/openapi.json").json()["paths"].keys().isdisjoint(p for _, p in routes)
    assert routes == {(m, p) for m, p, _ in PAGES}


@pytest.mark.parametrize(("method", "path"), [(m, p) for m, p, s in PAGES if s])
def test_no_data_without_a_session(
    client: TestClient, harness: Any, method: str, path: str
) -> None:
    url = _fill(path, harness)
    for cookies in ({}, {COOKIE: "0" * 64}):  # none, and a forged one
        client.cookies.clear()
        client.cookies.update(cookies)
        r = client.request(method, url, follow_redirects=False, headers=FORM, content="csrf=x")
        if method == "GET" and not path.endswith(FRAGMENTS):
            assert r.status_code == 303
            assert r.headers["location"] == f"/dashboard/login?next={url}"
        else:
            assert r.status_code == 401
        assert "test-federation" not in r.text
        assert "org-" not in r.text
    people = client.get(f"/v1/federations/{harness.id}/participant-tokens", headers=ADMIN).json()
    assert all(p["state"] == "active" for p in people)


def test_login_sets_a_strict_secure_httponly_cookie_with_expiry(
    client: TestClient, harness: Any
) -> None:
    r = login(client)
    assert r.status_code == 303
    assert r.headers["location"] == "/dashboard/"
    cookie = r.headers["set-cookie"]
    for attribute in ("HttpOnly", "Secure", "SameSite=strict", f"Max-Age={SESSION_TTL_S}"):
        assert attribute in cookie
    assert "Path=/dashboard" in cookie
    assert ADMIN_TOKEN not in cookie
    page = client.get("/dashboard/")
    assert page.status_code == 200
    assert "test-federation" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"


def test_participant_token_and_wrong_tokens_cannot_log_in(client: TestClient, harness: Any) -> None:
    for token in (harness.sims[0].token, "sfa_" + "A" * 43, ""):
        client.cookies.clear()
        r = login(client, token)
        assert r.status_code == 401
        assert "set-cookie" not in r.headers
        assert "participant tokens cannot log in" in r.text
        assert client.get("/dashboard/", follow_redirects=False).status_code == 303


def test_login_failures_are_rate_limited(db_url: str) -> None:
    app = create_app(make_settings(db_url, auth_failure_limit=3), clock=FakeClock())
    with TestClient(app, base_url="https://testserver") as client:
        codes = [login(client, "wrong").status_code for _ in range(4)]
        assert codes == [401, 401, 401, 429]
        assert login(client).status_code == 429  # even the right token, until it refills


def test_session_expires(client: TestClient, harness: Any, clock: FakeClock) -> None:
    login(client)
    assert client.get("/dashboard/").status_code == 200
    clock.advance(SESSION_TTL_S - 1)
    assert client.get("/dashboard/").status_code == 200
    clock.advance(2)
    assert client.get("/dashboard/", follow_redirects=False).status_code == 303


def test_revoking_the_admin_token_ends_its_sessions(client: TestClient, harness: Any) -> None:
    issued = client.post("/v1/admin/tokens", json={"name": "ops"}, headers=ADMIN).json()
    assert login(client, issued["token"]).status_code == 303
    assert client.get("/dashboard/").status_code == 200
    assert client.delete("/v1/admin/tokens/ops", headers=ADMIN).status_code == 200
    assert client.get("/dashboard/", follow_redirects=False).status_code == 303


def test_logout_ends_the_session(client: TestClient, harness: Any) -> None:
    login(client)
    stolen = client.cookies[COOKIE]
    page = client.get("/dashboard/")
    r = client.post(
        "/dashboard/logout",
        content=f"csrf={csrf_of(page.text)}",
        headers=FORM,
        follow_redirects=False,
    )
    assert r.status_code == 303
    client.cookies.clear()
    client.cookies[COOKIE] = stolen
    assert client.get("/dashboard/", follow_redirects=False).status_code == 303


def test_actions_need_the_csrf_token_and_a_same_origin(client: TestClient, harness: Any) -> None:
    login(client)
    target = harness.sims[-1]
    url = f"/dashboard/federations/{harness.id}/participants/{target.participant_id}/revoke"
    confirm = client.get(url)
    assert confirm.status_code == 200
    assert "Yes, revoke" in confirm.text
    token = csrf_of(confirm.text)
    refused = [
        client.post(url, content="csrf=", headers=FORM),
        client.post(url, content="csrf=" + "0" * 64, headers=FORM),
        client.post(
            url, content=f"csrf={token}", headers={**FORM, "origin": "https://evil.example"}
        ),
    ]
    assert [r.status_code for r in refused] == [403, 403, 403]
    assert client.get("/v1/participants/me", headers=target.headers).status_code == 200
    done = client.post(
        url,
        content=f"csrf={token}",
        headers={**FORM, "origin": "https://testserver"},
        follow_redirects=False,
    )
    assert done.status_code == 303
    assert client.get("/v1/participants/me", headers=target.headers).status_code == 401
    listing = client.get(done.headers["location"])
    assert f"participant {target.index} (org-" in listing.text


def test_rotate_shows_the_new_token_once(client: TestClient, harness: Any) -> None:
    login(client)
    target = harness.sims[0]
    url = f"/dashboard/federations/{harness.id}/participants/{target.participant_id}/rotate"
    token = csrf_of(client.get(url).text)
    r = client.post(url, content=f"csrf={token}", headers=FORM)
    assert r.status_code == 200
    new = r.text.split('class="token" readonly value="')[1].split('"')[0]
    assert new.startswith("sfp_")
    assert client.get("/v1/participants/me", headers=target.headers).status_code == 401
    me = client.get("/v1/participants/me", headers={"Authorization": f"Bearer {new}"})
    assert me.status_code == 200


def test_one_time_login_link(client: TestClient, harness: Any) -> None:
    r = client.post("/v1/admin/dashboard-links", headers=ADMIN)
    assert r.status_code == 201
    url = r.json()["url"]
    assert url.startswith("https://testserver/dashboard/link?code=")
    code = url.split("code=")[1]
    shown = client.get(f"/dashboard/link?code={code}")
    assert shown.status_code == 200
    assert COOKIE not in client.cookies  # a GET never logs in
    first = client.post(
        "/dashboard/link", content=f"code={code}", headers=FORM, follow_redirects=False
    )
    assert first.status_code == 303
    assert client.get("/dashboard/").status_code == 200
    client.cookies.clear()
    again = client.post("/dashboard/link", content=f"code={code}", headers=FORM)
    assert again.status_code == 401
    participant = {"Authorization": f"Bearer {harness.sims[0].token}"}
    assert client.post("/v1/admin/dashboard-links", headers=participant).status_code == 401


def test_plain_http_login_only_on_loopback(db_url: str) -> None:
    settings = make_settings(db_url)
    with TestClient(create_app(settings), base_url="http://coord.example.org") as remote:
        r = login(remote)
        assert r.status_code == 403
        assert "HTTPS" in r.text
        assert "set-cookie" not in r.headers
    loopback = TestClient(
        create_app(settings), base_url="http://127.0.0.1:8443", client=("127.0.0.1", 40000)
    )
    with loopback:
        assert login(loopback).status_code == 303


def test_missing_browser_skips_or_fails_under_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import dashboard as conftest

    monkeypatch.setattr(conftest, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setattr(conftest.shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="apt-get install -y chromium"):
        conftest.require_chromium()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="apt-get install -y chromium"):
        conftest.require_chromium()


def test_login_refuses_open_redirects_and_cross_origin_posts(client: TestClient) -> None:
    for target in ("//evil.example/", "https://evil.example/", "/dashboard/..//evil", "/v1/x"):
        r = client.post(
            "/dashboard/login",
            content=f"token={ADMIN_TOKEN}&next={target}",
            headers=FORM,
            follow_redirects=False,
        )
        assert r.status_code == 303
        assert r.headers["location"] == "/dashboard/"
    client.cookies.clear()
    r = client.post(
        "/dashboard/login",
        content=f"token={ADMIN_TOKEN}",
        headers={**FORM, "origin": "https://evil.example"},
        follow_redirects=False,
    )
    assert r.status_code == 403
    assert "set-cookie" not in r.headers
