"""HTTP conventions: authentication before validation, ``WWW-Authenticate`` on every 401,
``Allow`` on every 405, and paged lists with a stable order."""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

import pytest

from secfpp.coordinator.api.body import UNAUTHENTICATED_MAX_BODY
from secfpp.coordinator.app import create_app
from tests.support.asgi import TestClient
from tests.support.common import ADMIN
from tests.support.coordinator import make_settings

METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS")


@pytest.fixture
def client(db_url: str, clock: Any) -> Iterator[TestClient]:
    """The app without rate limits: these tests send hundreds of requests with no token."""
    settings = make_settings(db_url, auth_failure_limit=0, enrollment_rate_limit=0)
    with TestClient(create_app(settings, clock=clock)) as test_client:
        yield test_client


def _operations(client: TestClient) -> list[tuple[str, str, dict[str, Any]]]:
    paths = client.get("/openapi.json").json()["paths"]
    return [(m.upper(), p, op) for p, item in paths.items() for m, op in item.items()]


def _concrete(path: str) -> str:
    """A path with every parameter filled by a value that passes the schema."""
    return re.sub(r"\{[a-z_]+\}", lambda m: "1" if m.group() != "{stage}" else "distances", path)


def _secured(client: TestClient) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m, p, op) for m, p, op in _operations(client) if op.get("security")]


def test_every_401_carries_a_bearer_challenge(client: TestClient, problem: Any) -> None:
    secured = _secured(client)
    assert len(secured) >= 20
    for method, path, _ in secured:
        for headers in (
            {},
            {"Authorization": "Bearer not-a-token"},
            {"Authorization": "Basic eDp5"},
        ):
            r = client.request(method, _concrete(path), headers=headers)
            problem(r, 401, "invalid_token")
            assert r.headers["WWW-Authenticate"].startswith("Bearer"), (method, path)


@pytest.mark.parametrize(
    "body",
    [b"{", b"\x80\x81{}", b"[" * 50_000, b'{"unexpected": 1}'],
    ids=["truncated", "utf8", "deep", "schema"],
)
def test_authentication_comes_before_validation(
    client: TestClient, snapshot: Any, problem: Any, body: bytes
) -> None:
    """No token plus a malformed body or an out-of-range parameter is 401, never 422."""
    before = snapshot()
    for method, path, _ in _secured(client):
        bad_path = path.replace("{number}", "99999999999999999999")
        r = client.request(
            method,
            _concrete(bad_path),
            content=body,
            params={"limit": "0", "cursor": "%%"},
            headers={"Content-Type": "application/json"},
        )
        problem(r, 401, "invalid_token")
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
    enroll = client.post("/v1/enroll", content=body, headers={"Content-Type": "application/json"})
    # enrollment authenticates with a token in its body, which may hold at most 16 KiB
    assert enroll.status_code == (413 if len(body) > UNAUTHENTICATED_MAX_BODY else 422)
    assert snapshot() == before


def _matches(template: str, path: str) -> bool:
    return re.fullmatch(re.sub(r"\{[a-z_]+\}", "[^/]+", template), path) is not None


def _allowed(operations: list[tuple[str, str, dict[str, Any]]], path: str) -> set[str]:
    """The methods of the path's own template: where a literal segment and a parameter
    both take it (``.../enrollment-tokens/revoke-unused`` and ``.../{token_id}``), the
    template with the fewest parameters is the path's."""
    templates = {t for _, t, _ in operations if _matches(t, path)}
    own = min(templates, key=lambda t: t.count("{"))
    return {m for m, t, _ in operations if t == own}


def test_every_405_lists_the_allowed_methods(client: TestClient, problem: Any) -> None:
    operations = _operations(client)
    checked = 0
    for path in {_concrete(p) for _, p, _ in operations}:
        allowed = _allowed(operations, path)
        for method in set(METHODS) - allowed:
            r = client.request(method, path, headers=ADMIN)
            assert r.status_code == 405, (method, path, r.text)
            if method != "HEAD":
                problem(r, 405, "method_not_allowed")
            assert set(r.headers["Allow"].split(", ")) == allowed, (method, path)
            checked += 1
    assert checked > 100


def test_options_on_a_literal_path_lists_only_its_methods(client: TestClient, problem: Any) -> None:
    """``.../enrollment-tokens/revoke-unused`` is not ``.../{token_id}`` (issue 26)."""
    path = "/v1/federations/1/enrollment-tokens/revoke-unused"
    for method in ("OPTIONS", "DELETE", "GET"):
        r = client.request(method, path, headers=ADMIN)
        problem(r, 405, "method_not_allowed")
        assert r.headers["Allow"] == "POST", method


def _ids(page: dict[str, Any], key: str) -> list[Any]:
    return [item[key] for item in page["items"]]


def test_federations_are_paged_in_creation_order(
    client: TestClient, clock: Any, problem: Any
) -> None:
    created = []
    for i in range(5):
        r = client.post(
            "/v1/federations", json={"name": f"f{i}", "n_participants": 4}, headers=ADMIN
        )
        created.append(r.json()["id"])
        if i != 2:  # two federations share a creation time: ties go by id
            clock.advance(1)
    order = created[:2] + sorted(created[2:4]) + created[4:]
    first = client.get("/v1/federations", params={"limit": 2}, headers=ADMIN).json()
    assert _ids(first, "id") == order[:2]
    clock.advance(1)
    late = client.post("/v1/federations", json={"name": "late", "n_participants": 4}, headers=ADMIN)
    second = client.get(
        "/v1/federations", params={"limit": 2, "cursor": first["next_cursor"]}, headers=ADMIN
    ).json()
    assert _ids(second, "id") == order[2:4]
    third = client.get(
        "/v1/federations", params={"limit": 2, "cursor": second["next_cursor"]}, headers=ADMIN
    ).json()
    assert _ids(third, "id") == [order[4], late.json()["id"]]
    assert third["next_cursor"] is None
    everything = client.get("/v1/federations", headers=ADMIN).json()
    assert _ids(everything, "id") == [*order, late.json()["id"]]
    assert everything["next_cursor"] is None
    for bad in ("not-a-cursor", "W10", "WyJ4IiwieSJd", "WzFd"):  # junk, [], ["x","y"], [1]
        r = client.get("/v1/federations", params={"cursor": bad}, headers=ADMIN)
        problem(r, 422, "invalid_request")
    for limit in (0, 201):
        problem(
            client.get("/v1/federations", params={"limit": limit}, headers=ADMIN),
            422,
            "invalid_request",
        )


def test_rounds_and_participants_are_paged(harness: Any, problem: Any) -> None:
    h = harness
    for number in range(1, 4):
        h.start_round()
        r = h.client.post(f"/v1/federations/{h.id}/rounds/{number}/abort", headers=ADMIN)
        assert r.status_code == 200, r.text
    h.start_round()
    seen: list[int] = []
    cursor = None
    while True:
        params: dict[str, Any] = {"limit": 3} if cursor is None else {"limit": 3, "cursor": cursor}
        page = h.client.get(f"/v1/federations/{h.id}/rounds", params=params, headers=ADMIN).json()
        seen += _ids(page, "number")
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == [1, 2, 3, 4]
    stages = _ids(h.client.get(f"/v1/federations/{h.id}/rounds", headers=ADMIN).json(), "stage")
    assert stages == ["aborted", "aborted", "aborted", "sharing"]

    indices: list[int] = []
    cursor = None
    while True:
        params = {"limit": 5} if cursor is None else {"limit": 5, "cursor": cursor}
        page = h.client.get(
            f"/v1/federations/{h.id}/participants", params=params, headers=ADMIN
        ).json()
        indices += _ids(page, "index")
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert indices == list(range(8))
    names = _ids(
        h.client.get(f"/v1/federations/{h.id}/participants", headers=ADMIN).json(), "display_name"
    )
    assert sorted(names) == sorted(s.name for s in h.sims)
    problem(h.client.get("/v1/federations/nope/rounds", headers=ADMIN), 404, "federation_not_found")
    problem(
        h.client.get(
            f"/v1/federations/{h.id}/rounds", params={"cursor": "Wzk5OTk5OTk5OTk5XQ"}, headers=ADMIN
        ),
        422,
        "invalid_request",
    )
