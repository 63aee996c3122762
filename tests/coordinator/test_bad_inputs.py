"""Every bad input gets a 4xx problem document with a stable code and changes nothing."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from secfpp.crypto.wire import pack_field_vector
from tests.support.asgi import TestClient
from tests.support.common import ADMIN, FakeClock
from tests.support.coordinator import FederationHarness
from tests.support.frozen import FrozenFederations, copied_database

# ``sharing`` and ``distances`` are built once per backend and session and copied into each
# test's database (tests/support/frozen.py; building them cost 0.5-1 s of CPU per test), so
# the module runs on one worker.
pytestmark = pytest.mark.xdist_group("bad_inputs")


def _sharing(client: TestClient, clock: FakeClock, root: Path) -> FederationHarness:
    h = FederationHarness(client)
    h.start_round()
    h.sims[0].step()
    return h


def _distances(client: TestClient, clock: FakeClock, root: Path) -> FederationHarness:
    h = FederationHarness(client)
    h.start_round()
    h.act()
    assert h.stage(1) == "distances"
    return h


FROZEN = {"sharing": _sharing, "distances": _distances}


db_url = copied_database(FROZEN)


@pytest.fixture
def sharing(client: TestClient, backend: str, frozen: FrozenFederations) -> FederationHarness:
    """A federation whose round 1 is in the sharing stage; participant 0 has shared."""
    h: FederationHarness = frozen.built(_sharing, backend).twin(client)
    assert h.status(1)["uploads"]["sharing"] == [h.sims[0].index]
    return h


@pytest.fixture
def distances(client: TestClient, backend: str, frozen: FrozenFederations) -> FederationHarness:
    """Round 1 in the distance stage, nobody has answered yet."""
    h: FederationHarness = frozen.built(_distances, backend).twin(client)
    assert h.stage(1) == "distances"
    return h


def _share_body(h: Any, sim_index: int = 1) -> dict[str, Any]:
    sim = h.sims[sim_index]
    return sim.share_body(sim.task())


def _post_shares(h: Any, body: dict[str, Any], sim_index: int = 1, number: int = 1) -> Any:
    sim = h.sims[sim_index]
    return h.client.post(
        f"/v1/participants/me/rounds/{number}/shares", json=body, headers=sim.headers
    )


def test_result_in_the_wrong_stage(sharing: Any, snapshot: Any, problem: Any) -> None:
    before = snapshot()
    payload = pack_field_vector(np.zeros(3, dtype="int64"), prime=2**61 - 1)
    r = sharing.client.post(
        "/v1/participants/me/rounds/1/results/distances",
        json={"payload": base64.b64encode(payload).decode()},
        headers=sharing.sims[1].headers,
    )
    assert problem(r, 409, "wrong_stage")["stage"] == "sharing"
    assert snapshot() == before


def test_upload_for_the_wrong_round(sharing: Any, snapshot: Any, problem: Any) -> None:
    body = _share_body(sharing)
    before = snapshot()
    assert problem(_post_shares(sharing, body, number=2), 409, "wrong_round")["current"] == 1
    assert snapshot() == before


def test_unknown_recipient(sharing: Any, snapshot: Any, problem: Any) -> None:
    body = _share_body(sharing)
    body["envelopes"][0] = {**body["envelopes"][0], "recipient": 99}
    before = snapshot()
    assert problem(_post_shares(sharing, body), 422, "unknown_recipient")["recipient"] == 99
    assert snapshot() == before


def test_foreign_recipient_of_another_federation(sharing: Any, snapshot: Any, problem: Any) -> None:
    # A second, larger federation has a participant with index 9; index 9 is foreign here.
    other = sharing.client.post(
        "/v1/federations",
        json={
            "name": "other",
            "n_participants": 10,
            "backbone": None,
            "prompt": {"n_ctx": 2, "dim": 4},
        },
        headers=ADMIN,
    )
    assert other.status_code == 201
    body = _share_body(sharing)
    body["envelopes"][-1] = {**body["envelopes"][-1], "recipient": 9}
    before = snapshot()
    problem(_post_shares(sharing, body), 422, "unknown_recipient")
    assert snapshot() == before


def test_envelope_of_the_wrong_length(sharing: Any, snapshot: Any, problem: Any) -> None:
    body = _share_body(sharing)
    env = body["envelopes"][3]
    short = base64.b64decode(env["ciphertext"])[:-1]
    body["envelopes"][3] = {**env, "ciphertext": base64.b64encode(short).decode()}
    before = snapshot()
    assert problem(_post_shares(sharing, body), 422, "bad_envelope")["reason"] == "wrong_length"
    assert snapshot() == before


def test_missing_recipient(sharing: Any, snapshot: Any, problem: Any) -> None:
    body = _share_body(sharing)
    body["envelopes"] = body["envelopes"][:-1]
    before = snapshot()
    problem(_post_shares(sharing, body), 422, "missing_recipient")
    assert snapshot() == before


def test_zero_sharings_go_as_seeds_to_the_free_points_only(
    sharing: Any, snapshot: Any, problem: Any
) -> None:
    """N = 8, T_c = 2: the recipients at points 0..3 get a contribution as a ``zero-seed``,
    4..7 as a ``zero`` vector; the other kind for a recipient, or neither, is refused."""
    body = _share_body(sharing)
    zeros = {(e["recipient"], e["kind"]) for e in body["envelopes"] if "zero" in e["kind"]}
    assert zeros == {(j, "zero-seed") for j in range(4)} | {(j, "zero") for j in range(4, 8)}
    vector = next(e for e in body["envelopes"] if e["kind"] == "zero")
    seed = next(e for e in body["envelopes"] if e["kind"] == "zero-seed")
    before = snapshot()
    swapped = dict(body, envelopes=[e for e in body["envelopes"] if e is not seed])
    swapped["envelopes"].append({**vector, "recipient": seed["recipient"]})  # a vector to 0..3
    r = _post_shares(sharing, swapped)
    assert problem(r, 422, "bad_envelope")["reason"] == "wrong_kind"
    assert "gets its zero-sharing as 'zero-seed'" in r.json()["detail"]
    missing = dict(body, envelopes=[e for e in body["envelopes"] if e is not seed])
    assert problem(_post_shares(sharing, missing), 422, "missing_recipient")["missing"] == [
        [seed["recipient"], "zero-seed"]
    ]
    assert snapshot() == before
    assert _post_shares(sharing, body).status_code == 200


def test_result_of_the_wrong_length(distances: Any, snapshot: Any, problem: Any) -> None:
    sim = distances.sims[0]
    task = sim.task()
    length = task["distances"]["result_length"]
    payload = pack_field_vector(
        np.zeros(length - 1, dtype="int64"), prime=task["distances"]["prime"]
    )
    before = snapshot()
    r = distances.client.post(
        "/v1/participants/me/rounds/1/results/distances",
        json={"payload": base64.b64encode(payload).decode()},
        headers=sim.headers,
    )
    assert problem(r, 422, "bad_payload")["reason"] == "shape_mismatch"
    assert snapshot() == before


def test_values_outside_the_field(distances: Any, snapshot: Any, problem: Any) -> None:
    sim = distances.sims[0]
    task = sim.task()
    prime = task["distances"]["prime"]
    good = sim.distance_payload(task)
    bad = good[:24] + struct.pack("<Q", prime) + good[32:]  # first element = p
    before = snapshot()
    r = distances.client.post(
        "/v1/participants/me/rounds/1/results/distances",
        content=bad,
        headers={**sim.headers, "Content-Type": "application/octet-stream"},
    )
    assert problem(r, 422, "bad_payload")["reason"] == "value_out_of_range"
    assert snapshot() == before


def test_malformed_base64(sharing: Any, snapshot: Any, problem: Any) -> None:
    body = _share_body(sharing)
    body["envelopes"][0] = {**body["envelopes"][0], "ciphertext": "not*base64!"}
    before = snapshot()
    problem(_post_shares(sharing, body), 422, "malformed_base64")
    r = sharing.client.post(
        "/v1/participants/me/rounds/1/results/distances",
        json={"payload": "%%%"},
        headers=sharing.sims[1].headers,
    )
    problem(r, 422, "malformed_base64")
    assert snapshot() == before


def test_oversized_body(sharing: Any, snapshot: Any, problem: Any) -> None:
    body = _share_body(sharing)
    body["padding"] = "x" * (300 * 1024)  # the test settings allow 256 KiB
    before = snapshot()
    problem(_post_shares(sharing, body), 413, "payload_too_large")

    def chunks() -> Any:  # no Content-Length: counted as it streams
        for _ in range(40):
            yield b"x" * 8192

    r = sharing.client.post(
        "/v1/participants/me/rounds/1/shares",
        content=chunks(),
        headers={**sharing.sims[1].headers, "Content-Type": "application/json"},
    )
    problem(r, 413, "payload_too_large")
    assert snapshot() == before


def test_expired_enrollment_token(harness: Any, clock: Any, snapshot: Any, problem: Any) -> None:
    r = harness.client.post(
        f"/v1/federations/{harness.id}/enrollment-tokens",
        json={"count": 1, "ttl_s": 10},
        headers=ADMIN,
    )
    token = r.json()["tokens"][0]
    clock.advance(11)
    before = snapshot()
    problem(
        harness.client.post("/v1/enroll", json=_enroll_body(token, "late")), 401, "token_expired"
    )
    assert snapshot() == before


def _enroll_body(token: str, name: str) -> dict[str, str]:
    return {
        "enrollment_token": token,
        "display_name": name,
        "public_key": base64.b64encode(bytes(range(1, 33))).decode(),
    }


def test_used_enrollment_token(harness: Any, snapshot: Any, problem: Any) -> None:
    other = harness.client.post(
        "/v1/federations", json={"name": "open", "n_participants": 4}, headers=ADMIN
    ).json()
    r = harness.client.post(
        f"/v1/federations/{other['id']}/enrollment-tokens", json={"count": 1}, headers=ADMIN
    )
    token = r.json()["tokens"][0]
    assert harness.client.post("/v1/enroll", json=_enroll_body(token, "a")).status_code == 201
    before = snapshot()
    problem(harness.client.post("/v1/enroll", json=_enroll_body(token, "b")), 409, "token_used")
    assert snapshot() == before


def test_enrollment_beyond_n_participants(harness: Any, snapshot: Any, problem: Any) -> None:
    r = harness.client.post(
        f"/v1/federations/{harness.id}/enrollment-tokens", json={"count": 1}, headers=ADMIN
    )
    token = r.json()["tokens"][0]
    before = snapshot()
    problem(
        harness.client.post("/v1/enroll", json=_enroll_body(token, "x")), 409, "federation_full"
    )
    assert snapshot() == before


def test_wrong_participant_token(sharing: Any, snapshot: Any, problem: Any) -> None:
    body = _share_body(sharing)
    before = snapshot()
    r = sharing.client.post(
        "/v1/participants/me/rounds/1/shares",
        json=body,
        headers={"Authorization": "Bearer sfp_not-a-token"},
    )
    problem(r, 401, "invalid_token")
    problem(sharing.client.get("/v1/participants/me/task"), 401, "invalid_token")
    assert snapshot() == before


def test_wrong_admin_token(harness: Any, snapshot: Any, problem: Any) -> None:
    before = snapshot()
    r = harness.client.post(
        f"/v1/federations/{harness.id}/rounds",
        headers={"Authorization": f"Bearer {harness.sims[0].token}"},
    )
    problem(r, 401, "invalid_token")
    problem(harness.client.get("/v1/federations"), 401, "invalid_token")
    assert snapshot() == before


def test_reading_another_participants_inbox(distances: Any, snapshot: Any, problem: Any) -> None:
    victim = distances.sims[1]
    reader = distances.sims[0]
    before = snapshot()
    r = distances.client.get(
        f"/v1/participants/{victim.participant_id}/rounds/1/inbox", headers=reader.headers
    )
    problem(r, 403, "not_your_inbox")
    own = distances.client.get(
        f"/v1/participants/{reader.participant_id}/rounds/1/inbox", headers=reader.headers
    )
    assert own.status_code == 200
    assert {e["sender"] for e in own.json()["envelopes"]} == set(range(8))
    assert snapshot() == before


def test_conflicting_and_replayed_uploads(sharing: Any, snapshot: Any, problem: Any) -> None:
    sim = sharing.sims[0]  # already shared in the fixture
    body = sim.share_body(sim.task())
    before = snapshot()
    replay = _post_shares(sharing, body, sim_index=0)
    assert replay.status_code == 200
    assert replay.json()["replayed"] is True
    changed = {"envelopes": [dict(e) for e in body["envelopes"]]}
    raw = bytearray(base64.b64decode(changed["envelopes"][0]["ciphertext"]))
    raw[-1] ^= 1
    changed["envelopes"][0]["ciphertext"] = base64.b64encode(bytes(raw)).decode()
    problem(_post_shares(sharing, changed, sim_index=0), 409, "conflicting_upload")
    assert snapshot() == before


def test_invalid_federation_config(harness: Any, snapshot: Any, problem: Any) -> None:
    before = snapshot()
    r = harness.client.post(
        "/v1/federations",
        json={
            "name": "unsafe",
            "n_participants": 8,
            "crypto": {
                "reduced_dim": 16,
                "clustering_code": {"k": 1, "t": 2},
                "aggregation_code": {"k": 4, "t": 1},
                "clustering_field": {"prime": 2305843009213693951, "bits": 40, "clip": 4.0},
                "aggregation_field": {"prime": 2147483647, "bits": 16, "clip": 1.0},
                "l2_clip": 10.0,
                "min_aggregation_size": 3,
                "max_clusters": 4,
            },
        },
        headers=ADMIN,
    )
    assert problem(r, 422, "invalid_parameter")["parameter"] == "clustering_field.bits"
    assert snapshot() == before
    for code, reason in (({"k": 2, "t": 2}, "K = 1"), ({"k": 1, "t": 1}, "equivocation")):
        body = json.loads(r.request.content)
        body["crypto"]["clustering_code"] = code
        body["crypto"]["clustering_field"]["bits"] = 8
        refused = harness.client.post("/v1/federations", json=body, headers=ADMIN)
        answer = problem(refused, 422, "invalid_parameter")
        assert answer["parameter"] == "clustering_code"
        assert reason in answer["detail"]
    assert snapshot() == before
