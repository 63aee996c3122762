"""Participant and enrollment tokens over their lifetime, through the HTTP API:
revocation, rotation, listing without secrets, one public key per participant."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from secfpp.coordinator.auth.tokens import hash_token
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.transport import generate_keypair, public_key_bytes
from tests.support.asgi import TestClient
from tests.support.common import ADMIN
from tests.support.coordinator import FederationHarness, federation_request
from tests.support.frozen import FrozenFederations, copied_database, enrolled

# ``harness`` (8 participants enrolled) is built once per backend and session and copied into
# each test's database (tests/support/frozen.py; enrolling cost 0.3-0.5 s of CPU per test),
# so the module runs on one worker.
pytestmark = pytest.mark.xdist_group("token_lifecycle")


FROZEN = {"harness": enrolled}


db_url = copied_database(FROZEN)


@pytest.fixture
def harness(client: TestClient, backend: str, frozen: FrozenFederations) -> FederationHarness:
    """A federation of N = 8 simulated participants on :func:`client`, all enrolled."""
    h: FederationHarness = frozen.built(enrolled, backend).twin(client)
    return h


# Rounds without a distance stage (every round is a warmup round): these tests are about
# who takes part, not about clustering.
WARM = {"warmup_rounds": 1000, "lr_global": 1.0}
TERMINAL = {"published", "failed", "aborted"}


def _finish(h: Any, number: int, skip: set[int]) -> str:
    for _ in range(6):
        stage = h.stage(number)
        if stage in TERMINAL:
            return str(stage)
        h.act(skip)
    return str(h.stage(number))


def _fresh_federation(client: Any, **overrides: Any) -> str:
    r = client.post("/v1/federations", json=federation_request(**overrides), headers=ADMIN)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _issue(client: Any, fid: str, count: int) -> tuple[list[str], list[int]]:
    r = client.post(
        f"/v1/federations/{fid}/enrollment-tokens", json={"count": count}, headers=ADMIN
    )
    assert r.status_code == 201, r.text
    body = r.json()
    assert len(body["ids"]) == len(body["tokens"]) == count
    return body["tokens"], body["ids"]


def _key(name: str) -> str:
    keys = generate_keypair(DeterministicRandom(f"key|{name}"))
    return base64.b64encode(public_key_bytes(keys.public)).decode()


def _enroll(client: Any, token: str, key: str, name: str = "org") -> Any:
    return client.post(
        "/v1/enroll", json={"enrollment_token": token, "display_name": name, "public_key": key}
    )


def test_revoked_participant_is_refused_at_once_and_left_out_of_the_next_round(
    client: Any, make_harness: Any, problem: Any
) -> None:
    h = make_harness(client, rounds=WARM)
    first = h.run_round()
    assert h.stage(first) == "published"
    gone = h.sims[-1]
    url = f"/v1/federations/{h.id}/participants/{gone.participant_id}/revoke"

    r = client.post(url, headers=ADMIN)
    assert r.status_code == 200, r.text
    revoked = r.json()
    assert (revoked["state"], revoked["index"]) == ("revoked", gone.index)
    # its token fails at once, on every participant route
    problem(client.get("/v1/participants/me", headers=gone.headers), 401, "invalid_token")
    problem(client.get("/v1/participants/me/task", headers=gone.headers), 401, "invalid_token")
    problem(
        client.get(f"/v1/participants/me/rounds/{first}/outcome", headers=gone.headers),
        401,
        "invalid_token",
    )
    # revocation is idempotent: the first time stands
    again = client.post(url, headers=ADMIN)
    assert again.status_code == 200
    assert again.json()["revoked_at"] == revoked["revoked_at"]

    second = h.start_round()
    others = sorted(s.index for s in h.sims if s is not gone)
    assert h.status(second)["participants"] == others
    assert h.sims[0].task()["sharing"]["recipients"] == others
    h.act({gone.index})  # everybody else shares; the clock does not move
    status = h.status(second)
    assert status["stage"] != "sharing", "sharing waited for the revoked participant"
    assert status["present"] == others
    assert str(gone.index) not in status["dropped"]
    assert _finish(h, second, {gone.index}) == "published"

    # its history stays
    past = h.status(first)
    assert gone.index in past["participants"]
    assert gone.index in past["present"]
    assert gone.index in past["uploads"]["sharing"]
    listed = client.get(f"/v1/federations/{h.id}/participant-tokens", headers=ADMIN).json()
    assert [p["index"] for p in listed] == sorted(s.index for s in h.sims)
    assert {p["index"]: p["state"] for p in listed}[gone.index] == "revoked"
    assert sum(p["state"] == "active" for p in listed) == len(h.sims) - 1


def test_rotation_kills_the_old_token_and_the_new_one_works(
    client: Any, make_harness: Any, clock: Any, problem: Any
) -> None:
    h = make_harness(client, rounds=WARM)
    sim = h.sims[2]
    old = dict(sim.headers)
    clock.advance(3600)
    r = client.post(
        f"/v1/federations/{h.id}/participants/{sim.participant_id}/token", headers=ADMIN
    )
    assert r.status_code == 201, r.text
    issued = r.json()
    assert issued["participant_id"] == sim.participant_id
    assert issued["index"] == sim.index
    assert issued["api_token"].startswith("sfp_")
    assert issued["api_token"] != sim.token

    problem(client.get("/v1/participants/me", headers=old), 401, "invalid_token")
    sim.token = issued["api_token"]
    me = client.get("/v1/participants/me", headers=sim.headers)
    assert me.status_code == 200, me.text
    assert (me.json()["participant_id"], me.json()["index"]) == (sim.participant_id, sim.index)
    # the rotated participant still takes part: a whole round with everybody
    number = h.run_round()
    assert h.stage(number) == "published"
    assert h.status(number)["present"] == sorted(s.index for s in h.sims)

    listed = client.get(f"/v1/federations/{h.id}/participant-tokens", headers=ADMIN).json()
    row = next(p for p in listed if p["participant_id"] == sim.participant_id)
    assert row["state"] == "active"
    assert row["token_issued_at"] == issued["issued_at"]
    assert row["token_issued_at"] != row["enrolled_at"]
    assert row["token_last_used_at"] is not None


def test_revoked_participant_gets_no_new_token(
    client: Any, harness: Any, second_client: Any, problem: Any
) -> None:
    sim = harness.sims[0]
    base = f"/v1/federations/{harness.id}/participants/{sim.participant_id}"
    assert client.post(f"{base}/revoke", headers=ADMIN).status_code == 200
    problem(client.post(f"{base}/token", headers=ADMIN), 409, "participant_revoked")
    # another coordinator process on the same database refuses the token too
    problem(second_client.get("/v1/participants/me", headers=sim.headers), 401, "invalid_token")


def test_unknown_or_foreign_participant_is_404(client: Any, harness: Any, problem: Any) -> None:
    other = _fresh_federation(client, name="other")
    sim = harness.sims[0]
    for path in ("token", "revoke"):
        problem(
            client.post(
                f"/v1/federations/{other}/participants/{sim.participant_id}/{path}", headers=ADMIN
            ),
            404,
            "participant_not_found",
        )
        problem(
            client.post(f"/v1/federations/{harness.id}/participants/nobody/{path}", headers=ADMIN),
            404,
            "participant_not_found",
        )
        problem(
            client.post(
                f"/v1/federations/nope/participants/{sim.participant_id}/{path}", headers=ADMIN
            ),
            404,
            "federation_not_found",
        )
    # nothing happened to the participant
    assert client.get("/v1/participants/me", headers=sim.headers).status_code == 200


def test_revoked_enrollment_token_cannot_enroll(client: Any, snapshot: Any, problem: Any) -> None:
    fid = _fresh_federation(client)
    tokens, ids = _issue(client, fid, 3)
    r = client.delete(f"/v1/federations/{fid}/enrollment-tokens/{ids[0]}", headers=ADMIN)
    assert r.status_code == 200, r.text
    assert (r.json()["id"], r.json()["state"]) == (ids[0], "revoked")

    before = snapshot()
    problem(_enroll(client, tokens[0], _key("a")), 401, "token_revoked")
    assert snapshot() == before

    # a used token cannot be revoked; revoke-unused takes exactly the unused rest
    assert _enroll(client, tokens[1], _key("b")).status_code == 201
    used = problem(
        client.delete(f"/v1/federations/{fid}/enrollment-tokens/{ids[1]}", headers=ADMIN),
        409,
        "token_used",
    )
    assert used["participant_id"]
    r = client.post(f"/v1/federations/{fid}/enrollment-tokens/revoke-unused", headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json() == {"revoked": [ids[2]]}
    problem(_enroll(client, tokens[2], _key("c")), 401, "token_revoked")
    again = client.post(f"/v1/federations/{fid}/enrollment-tokens/revoke-unused", headers=ADMIN)
    assert again.json() == {"revoked": []}

    page = client.get(f"/v1/federations/{fid}/enrollment-tokens", headers=ADMIN).json()
    assert [(t["id"], t["state"]) for t in page["items"]] == [
        (ids[0], "revoked"),
        (ids[1], "used"),
        (ids[2], "revoked"),
    ]
    assert page["next_cursor"] is None


def test_enrollment_token_ids_are_scoped_to_their_federation(client: Any, problem: Any) -> None:
    fid, other = _fresh_federation(client), _fresh_federation(client, name="other")
    tokens, ids = _issue(client, fid, 1)
    problem(
        client.delete(f"/v1/federations/{other}/enrollment-tokens/{ids[0]}", headers=ADMIN),
        404,
        "token_not_found",
    )
    problem(
        client.delete(f"/v1/federations/{fid}/enrollment-tokens/{ids[0] + 1000}", headers=ADMIN),
        404,
        "token_not_found",
    )
    problem(
        client.delete(f"/v1/federations/{fid}/enrollment-tokens/99999999999", headers=ADMIN),
        422,
        "invalid_request",
    )
    assert client.post(
        f"/v1/federations/{other}/enrollment-tokens/revoke-unused", headers=ADMIN
    ).json() == {"revoked": []}
    assert _enroll(client, tokens[0], _key("a")).status_code == 201


def test_enrollment_token_list_pages_and_filters(client: Any, clock: Any) -> None:
    fid = _fresh_federation(client)
    _, ids = _issue(client, fid, 5)
    seen: list[int] = []
    cursor = None
    for _ in range(5):
        params: dict[str, Any] = {"limit": 2}
        if cursor is not None:
            params["cursor"] = cursor
        page = client.get(
            f"/v1/federations/{fid}/enrollment-tokens", params=params, headers=ADMIN
        ).json()
        seen += [t["id"] for t in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ids

    client.delete(f"/v1/federations/{fid}/enrollment-tokens/{ids[1]}", headers=ADMIN)
    clock.advance(8 * 24 * 3600)  # past the default TTL of a week
    _, fresh = _issue(client, fid, 1)

    def ids_in(state: str) -> list[int]:
        r = client.get(
            f"/v1/federations/{fid}/enrollment-tokens", params={"state": state}, headers=ADMIN
        )
        assert r.status_code == 200, r.text
        return [t["id"] for t in r.json()["items"]]

    assert ids_in("revoked") == [ids[1]]
    assert ids_in("expired") == [i for i in ids if i != ids[1]]
    assert ids_in("unused") == fresh
    assert ids_in("used") == []
    # expired tokens are not "unused": revoke-unused leaves them be
    r = client.post(f"/v1/federations/{fid}/enrollment-tokens/revoke-unused", headers=ADMIN)
    assert r.json() == {"revoked": fresh}


def test_listings_never_contain_a_token_or_its_hash(client: Any, harness: Any) -> None:
    fid = harness.id
    enrollment, _ = _issue(client, fid, 2)
    rotated = client.post(
        f"/v1/federations/{fid}/participants/{harness.sims[1].participant_id}/token",
        headers=ADMIN,
    ).json()["api_token"]
    created = client.post("/v1/admin/tokens", json={"name": "ops"}, headers=ADMIN).json()
    client.post(
        f"/v1/federations/{fid}/participants/{harness.sims[0].participant_id}/revoke", headers=ADMIN
    )
    secrets = [*enrollment, rotated, created["token"], *(s.token for s in harness.sims)]
    secrets += [hash_token(s) for s in list(secrets)]
    bodies = [
        client.get(f"/v1/federations/{fid}/participant-tokens", headers=ADMIN).text,
        client.get(f"/v1/federations/{fid}/enrollment-tokens", headers=ADMIN).text,
        client.get("/v1/admin/tokens", headers=ADMIN).text,
        client.get(f"/v1/federations/{fid}", headers=ADMIN).text,
    ]
    for body in bodies:
        for secret in secrets:
            assert secret not in body
    assert "hash" not in " ".join(bodies)


def test_a_public_key_enrolls_once_per_federation(client: Any, snapshot: Any, problem: Any) -> None:
    fid, other = _fresh_federation(client), _fresh_federation(client, name="other")
    tokens, _ = _issue(client, fid, 2)
    key = _key("shared")
    assert _enroll(client, tokens[0], key, "first").status_code == 201

    before = snapshot()
    body = problem(_enroll(client, tokens[1], key, "second"), 409, "public_key_taken")
    assert "key" in body["detail"]
    assert snapshot() == before  # the enrollment token was not spent
    assert _enroll(client, tokens[1], _key("own"), "second").status_code == 201

    # another federation may see the same key (a site in two federations)
    (elsewhere,), _ = _issue(client, other, 1)
    assert _enroll(client, elsewhere, key, "first").status_code == 201


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("get", "/v1/federations/{fid}/participant-tokens"),
        ("post", "/v1/federations/{fid}/participants/{pid}/token"),
        ("post", "/v1/federations/{fid}/participants/{pid}/revoke"),
        ("get", "/v1/federations/{fid}/enrollment-tokens"),
        ("delete", "/v1/federations/{fid}/enrollment-tokens/1"),
        ("post", "/v1/federations/{fid}/enrollment-tokens/revoke-unused"),
        ("get", "/v1/admin/tokens"),
        ("delete", "/v1/admin/tokens/ops"),
    ],
)
def test_lifecycle_routes_are_admin_only(
    client: Any, harness: Any, snapshot: Any, problem: Any, method: str, path: str
) -> None:
    sim = harness.sims[0]
    url = path.format(fid=harness.id, pid=sim.participant_id)
    before = snapshot()
    for headers in ({}, sim.headers, {"Authorization": "Bearer sfa_not-a-token"}):
        response = client.request(method, url, headers=headers)
        body = problem(response, 401, "invalid_token")
        assert sim.token not in str(body)
    assert snapshot() == before
    assert client.get("/v1/participants/me", headers=sim.headers).status_code == 200


def test_a_cursor_from_elsewhere_is_refused(client: Any, problem: Any) -> None:
    fid = _fresh_federation(client)
    _issue(client, fid, 1)
    for cursor in ("garbage", "WyJ4Il0"):  # not base64 JSON; ["x"] (a string, not an id)
        problem(
            client.get(
                f"/v1/federations/{fid}/enrollment-tokens",
                params={"cursor": cursor},
                headers=ADMIN,
            ),
            422,
            "invalid_request",
        )


LIFECYCLE_OPERATIONS = {
    ("get", "/v1/federations/{federation_id}/participant-tokens"): set(),
    ("post", "/v1/federations/{federation_id}/participants/{participant_id}/token"): {
        "participant_not_found",
        "participant_revoked",
    },
    ("post", "/v1/federations/{federation_id}/participants/{participant_id}/revoke"): {
        "participant_not_found"
    },
    ("get", "/v1/federations/{federation_id}/enrollment-tokens"): set(),
    ("delete", "/v1/federations/{federation_id}/enrollment-tokens/{token_id}"): {
        "token_not_found",
        "token_used",
    },
    ("post", "/v1/federations/{federation_id}/enrollment-tokens/revoke-unused"): set(),
    ("get", "/v1/admin/tokens"): set(),
    ("post", "/v1/admin/tokens"): {"token_name_taken"},
    ("delete", "/v1/admin/tokens/{name}"): {
        "token_not_found",
        "token_in_settings",
        "last_admin_token",
    },
}


def test_lifecycle_operations_are_documented(client: Any) -> None:
    spec = client.get("/openapi.json").json()
    for (method, path), specific in LIFECYCLE_OPERATIONS.items():
        op = spec["paths"][path][method]
        assert len(op["summary"].split()) >= 4, (method, path)
        assert op["description"], (method, path)
        assert op["security"] == [{"AdminToken": []}], (method, path)
        documented = {
            code
            for status, response in op["responses"].items()
            if status[0] in "45"
            for code in response.get("x-problem-codes", [])
        }
        assert {"invalid_token", "rate_limited"} | specific <= documented, (method, path)
        assert "Retry-After" in op["responses"]["429"]["headers"]
        if "{federation_id}" in path:
            assert "federation_not_found" in documented
    assert "token_revoked" in str(spec["paths"]["/v1/enroll"]["post"]["responses"]["401"])
    assert "public_key_taken" in str(spec["paths"]["/v1/enroll"]["post"]["responses"]["409"])
