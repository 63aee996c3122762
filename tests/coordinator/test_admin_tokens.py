"""Admin credentials: the settings' token as one named token, named tokens created and
revoked at run time, effective at once in every process on the database."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from secfpp.coordinator.app import create_app
from tests.support.asgi import TestClient
from tests.support.common import ADMIN
from tests.support.coordinator import make_settings


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def no_settings_token(db_url: str, clock: Any) -> Iterator[TestClient]:
    """A coordinator on the same database whose settings hold no admin token."""
    app = create_app(make_settings(db_url, admin_token=""), clock=clock)
    with TestClient(app) as test_client:
        yield test_client


def test_second_admin_token_works_and_a_revoked_one_stops(
    client: Any, second_client: Any, clock: Any, problem: Any
) -> None:
    r = client.post("/v1/admin/tokens", json={"name": "ops-1"}, headers=ADMIN)
    assert r.status_code == 201, r.text
    first = r.json()
    assert first["name"] == "ops-1"
    assert first["token"].startswith("sfa_")
    # works at once, here and in another process on the same database
    assert client.get("/v1/federations", headers=bearer(first["token"])).status_code == 200
    assert second_client.get("/v1/federations", headers=bearer(first["token"])).status_code == 200

    # rotation: ops-1 creates ops-2, ops-2 revokes ops-1
    second = client.post(
        "/v1/admin/tokens", json={"name": "ops-2"}, headers=bearer(first["token"])
    ).json()
    clock.advance(120)
    r = second_client.delete("/v1/admin/tokens/ops-1", headers=bearer(second["token"]))
    assert r.status_code == 200, r.text
    assert r.json()["state"] == "revoked"
    for c in (client, second_client):
        problem(c.get("/v1/federations", headers=bearer(first["token"])), 401, "invalid_token")
        assert c.get("/v1/federations", headers=bearer(second["token"])).status_code == 200
    # the settings' token keeps working
    assert client.get("/v1/federations", headers=ADMIN).status_code == 200

    listed = client.get("/v1/admin/tokens", headers=ADMIN).json()
    assert [(t["name"], t["source"], t["state"]) for t in listed] == [
        ("settings", "settings", "active"),
        ("ops-1", "api", "revoked"),
        ("ops-2", "api", "active"),
    ]
    assert listed[2]["last_used_at"] is not None
    # revoking again is idempotent; names are never reused
    again = client.delete("/v1/admin/tokens/ops-1", headers=ADMIN)
    assert again.json()["revoked_at"] == r.json()["revoked_at"]
    problem(
        client.post("/v1/admin/tokens", json={"name": "ops-1"}, headers=ADMIN),
        409,
        "token_name_taken",
    )


def test_settings_token_is_managed_in_the_settings(client: Any, problem: Any) -> None:
    problem(client.delete("/v1/admin/tokens/settings", headers=ADMIN), 409, "token_in_settings")
    problem(
        client.post("/v1/admin/tokens", json={"name": "settings"}, headers=ADMIN),
        409,
        "token_name_taken",
    )
    problem(client.delete("/v1/admin/tokens/nobody", headers=ADMIN), 404, "token_not_found")
    assert client.get("/v1/federations", headers=ADMIN).status_code == 200


@pytest.mark.parametrize("name", ["", "Ops", "ops 1", "-ops", "a" * 65, "ops\u0000", "ops/1"])
def test_admin_token_names_are_checked(client: Any, problem: Any, name: str) -> None:
    problem(
        client.post("/v1/admin/tokens", json={"name": name}, headers=ADMIN),
        422,
        "invalid_request",
    )
    assert [t["name"] for t in client.get("/v1/admin/tokens", headers=ADMIN).json()] == ["settings"]


def test_the_last_admin_credential_cannot_be_revoked(
    client: Any, no_settings_token: Any, problem: Any
) -> None:
    problem(no_settings_token.get("/v1/federations", headers=ADMIN), 401, "invalid_token")
    only = client.post("/v1/admin/tokens", json={"name": "only"}, headers=ADMIN).json()
    headers = bearer(only["token"])
    assert no_settings_token.get("/v1/admin/tokens", headers=headers).json() == [
        {
            "name": "only",
            "source": "api",
            "created_at": only["created_at"],
            "last_used_at": only["created_at"],
            "state": "active",
            "revoked_at": None,
        }
    ]
    problem(
        no_settings_token.delete("/v1/admin/tokens/only", headers=headers), 409, "last_admin_token"
    )
    spare = no_settings_token.post("/v1/admin/tokens", json={"name": "spare"}, headers=headers)
    assert spare.status_code == 201
    assert no_settings_token.delete("/v1/admin/tokens/only", headers=headers).status_code == 200
    problem(no_settings_token.get("/v1/federations", headers=headers), 401, "invalid_token")
    problem(
        no_settings_token.delete("/v1/admin/tokens/spare", headers=bearer(spare.json()["token"])),
        409,
        "last_admin_token",
    )


def test_participant_token_is_not_an_admin_token(client: Any, harness: Any, problem: Any) -> None:
    sim = harness.sims[0]
    problem(client.get("/v1/admin/tokens", headers=sim.headers), 401, "invalid_token")
    problem(
        client.post("/v1/admin/tokens", json={"name": "mine"}, headers=sim.headers),
        401,
        "invalid_token",
    )
    admin = client.post("/v1/admin/tokens", json={"name": "ops"}, headers=ADMIN).json()
    problem(client.get("/v1/participants/me", headers=bearer(admin["token"])), 401, "invalid_token")
