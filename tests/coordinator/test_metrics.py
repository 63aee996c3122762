"""Participants' metrics: stored once per name, replayed, conflicts and bad input refused
with a problem document and no change; shown in the admin round status and per federation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from secfpp.coordinator.rounds import participant_metrics
from tests.support.asgi import TestClient
from tests.support.common import ADMIN, FakeClock
from tests.support.coordinator import FederationHarness
from tests.support.frozen import FrozenFederations, copied_database, round_one_started

# ``published`` and ``started`` are built once per backend and session and copied into each
# test's database (tests/support/frozen.py; a whole round cost 2-3 s of CPU per test), so
# the module runs on one worker.
pytestmark = pytest.mark.xdist_group("metrics")


def _published(client: TestClient, clock: FakeClock, root: Path) -> FederationHarness:
    h = FederationHarness(client)
    assert h.stage(h.run_round()) == "published"
    return h


FROZEN = {"published": _published, "started": round_one_started}


db_url = copied_database(FROZEN)


@pytest.fixture
def published(client: TestClient, backend: str, frozen: FrozenFederations) -> FederationHarness:
    """A federation whose round 1 is published."""
    h: FederationHarness = frozen.built(_published, backend).twin(client)
    assert h.stage(1) == "published"
    return h


@pytest.fixture
def started(client: TestClient, backend: str, frozen: FrozenFederations) -> FederationHarness:
    """A federation whose round 1 has just started (metrics are accepted in any stage)."""
    h: FederationHarness = frozen.built(round_one_started, backend).twin(client)
    assert h.stage(1) == "sharing"
    return h


def _report(h: Any, body: Any, sim: int = 0, number: int = 1) -> Any:
    return h.client.post(
        f"/v1/participants/me/rounds/{number}/metrics", json=body, headers=h.sims[sim].headers
    )


def _report_raw(h: Any, text: str, sim: int = 0, number: int = 1) -> Any:
    return h.client.post(
        f"/v1/participants/me/rounds/{number}/metrics",
        content=text.encode(),
        headers={**h.sims[sim].headers, "Content-Type": "application/json"},
    )


@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
def test_report_replay_and_add(published: Any, snapshot: Any) -> None:
    first = _report(published, {"accuracy": 0.81, "loss": 1})
    assert first.status_code == 200, first.text
    assert first.json() == {
        "round": 1,
        "participant_index": 0,
        "accepted": 2,
        "replayed": False,
        "metrics": {"accuracy": 0.81, "loss": 1.0},
    }
    before = snapshot()
    again = _report(published, {"loss": 1.0, "accuracy": 0.81})
    assert again.status_code == 200
    assert again.json()["replayed"] is True
    assert again.json()["accepted"] == 0
    assert snapshot() == before
    more = _report(published, {"accuracy": 0.81, "f1": 0.5})
    assert more.status_code == 200
    assert (more.json()["accepted"], more.json()["replayed"]) == (1, False)
    assert more.json()["metrics"] == {"accuracy": 0.81, "loss": 1.0, "f1": 0.5}


def test_another_value_for_a_stored_name_conflicts(
    published: Any, snapshot: Any, problem: Any
) -> None:
    assert _report(published, {"accuracy": 0.81}).status_code == 200
    before = snapshot()
    body = problem(_report(published, {"accuracy": 0.82, "loss": 0.3}), 409, "conflicting_upload")
    assert body["names"] == ["accuracy"]
    assert snapshot() == before  # "loss" was not stored either


def test_each_participant_has_its_own_names(published: Any) -> None:
    assert _report(published, {"accuracy": 0.8}, sim=0).status_code == 200
    assert _report(published, {"accuracy": 0.6}, sim=1).status_code == 200
    assert published.status(1)["metrics"] == {"0": {"accuracy": 0.8}, "1": {"accuracy": 0.6}}


BAD_BODIES = {
    "uppercase_name": ('{"Accuracy": 0.5}', "string_pattern_mismatch"),
    "leading_digit": ('{"1acc": 0.5}', "string_pattern_mismatch"),
    "dash": ('{"top-1": 0.5}', "string_pattern_mismatch"),
    "empty_name": ('{"": 0.5}', "string_pattern_mismatch"),
    "name_of_41": (json.dumps({"a" * 41: 0.5}), "string_pattern_mismatch"),
    "overflow": ('{"accuracy": 1e400}', "finite_number"),
    "string_value": ('{"accuracy": "0.5"}', "float_type"),
    "bool_value": ('{"accuracy": true}', "float_type"),
    "null_value": ('{"accuracy": null}', "float_type"),
    "nested_value": ('{"accuracy": {"top1": 0.5}}', "float_type"),
    "too_many": (json.dumps({f"m{i}": 0.5 for i in range(17)}), "too_long"),
    "empty": ("{}", "too_short"),
    "list": ("[0.5]", "dict_type"),
}
# Not JSON (NaN and Infinity are not JSON numbers): refused before parsing.
MALFORMED_BODIES = {
    "nan": '{"accuracy": NaN}',
    "infinity": '{"accuracy": Infinity}',
    "minus_infinity": '{"accuracy": -Infinity}',
    "not_json": "accuracy=0.5",
}


@pytest.mark.parametrize("case", list(BAD_BODIES), ids=list(BAD_BODIES))
def test_bad_bodies(started: Any, snapshot: Any, problem: Any, case: str) -> None:
    text, error_type = BAD_BODIES[case]
    before = snapshot()
    body = problem(_report_raw(started, text), 422, "invalid_request")
    assert error_type in {e["type"] for e in body["errors"]}
    assert snapshot() == before


@pytest.mark.parametrize("case", list(MALFORMED_BODIES), ids=list(MALFORMED_BODIES))
def test_malformed_bodies(started: Any, snapshot: Any, problem: Any, case: str) -> None:
    before = snapshot()
    problem(_report_raw(started, MALFORMED_BODIES[case]), 422, "malformed_json")
    assert snapshot() == before


def test_sixteen_entries_of_forty_characters_are_the_limit(started: Any) -> None:
    r = _report(started, {f"m{i}": i / 16 for i in range(16)} | {"a" * 40: 1.0})
    assert r.status_code == 422  # 17
    r = _report(started, {f"m{i}": i / 16 for i in range(15)} | {"a" * 40: 1.0})
    assert r.status_code == 200, r.text
    assert r.json()["accepted"] == 16


@pytest.mark.parametrize("number", [2, 2**31 - 1])
def test_unknown_round(started: Any, snapshot: Any, problem: Any, number: int) -> None:
    before = snapshot()
    problem(_report(started, {"accuracy": 0.5}, number=number), 404, "round_not_found")
    assert snapshot() == before


@pytest.mark.parametrize("number", [0, -1, 2**31])
def test_round_number_out_of_range(started: Any, snapshot: Any, problem: Any, number: int) -> None:
    before = snapshot()
    problem(_report(started, {"accuracy": 0.5}, number=number), 422, "invalid_request")
    assert snapshot() == before


def test_round_of_another_federation(
    started: Any, make_harness: Any, snapshot: Any, problem: Any
) -> None:
    # The second federation has no round yet; round 1 exists only in the first one.
    other = make_harness(started.client, name="other")
    before = snapshot()
    problem(_report(other, {"accuracy": 0.5}), 404, "round_not_found")
    assert snapshot() == before
    assert started.status(1)["metrics"] == {}


def test_needs_a_participant_token(started: Any, snapshot: Any, problem: Any) -> None:
    before = snapshot()
    r = started.client.post("/v1/participants/me/rounds/1/metrics", json={"accuracy": 0.5})
    problem(r, 401, "invalid_token")
    r = started.client.post(
        "/v1/participants/me/rounds/1/metrics", json={"accuracy": 0.5}, headers=ADMIN
    )
    problem(r, 401, "invalid_token")
    assert snapshot() == before


def test_accepted_in_any_stage_without_touching_the_round(harness: Any) -> None:
    number = harness.start_round()
    version = harness.status(number)["version"]
    r = _report(harness, {"train_loss": 0.7}, number=number)
    assert r.status_code == 200, r.text
    status = harness.status(number)
    assert (status["stage"], status["version"]) == ("sharing", version)
    assert status["metrics"] == {"0": {"train_loss": 0.7}}


def test_a_racing_report_of_the_same_name_is_compared(
    started: Any, monkeypatch: pytest.MonkeyPatch, problem: Any
) -> None:
    """The insert loses a race (unique violation) and compares with the winner's row."""
    assert _report(started, {"accuracy": 0.8}).status_code == 200
    real = participant_metrics._stored
    calls: list[int] = []

    def stale_then_real(*args: Any) -> dict[str, float]:
        calls.append(1)
        return {} if len(calls) == 1 else real(*args)

    monkeypatch.setattr(participant_metrics, "_stored", stale_then_real)
    r = _report(started, {"accuracy": 0.8})
    assert r.status_code == 200, r.text
    assert r.json()["replayed"] is True
    calls.clear()
    problem(_report(started, {"accuracy": 0.9}), 409, "conflicting_upload")
    assert started.status(1)["metrics"] == {"0": {"accuracy": 0.8}}


def test_federation_metrics_per_round_per_participant(published: Any, problem: Any) -> None:
    h = published
    for sim in h.sims[:3]:
        assert _report(h, {"accuracy": 0.5 + sim.index / 10}, sim=sim.index).status_code == 200
    assert h.stage(h.run_round()) == "published"
    assert _report(h, {"accuracy": 0.9, "loss": 0.1}, sim=2, number=2).status_code == 200
    h.start_round()
    r = h.client.get(f"/v1/federations/{h.id}/metrics", headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json() == {
        "federation_id": h.id,
        "rounds": [
            {
                "number": 1,
                "stage": "published",
                "metrics": {"0": {"accuracy": 0.5}, "1": {"accuracy": 0.6}, "2": {"accuracy": 0.7}},
            },
            {"number": 2, "stage": "published", "metrics": {"2": {"accuracy": 0.9, "loss": 0.1}}},
            {"number": 3, "stage": "sharing", "metrics": {}},
        ],
    }
    assert h.status(2)["metrics"] == {"2": {"accuracy": 0.9, "loss": 0.1}}
    problem(
        h.client.get("/v1/federations/nope/metrics", headers=ADMIN), 404, "federation_not_found"
    )
    problem(h.client.get(f"/v1/federations/{h.id}/metrics"), 401, "invalid_token")


def test_openapi_documents_the_metrics_routes(client: Any) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    report = paths["/v1/participants/me/rounds/{number}/metrics"]["post"]
    assert {"404", "409", "422"} <= set(report["responses"])
    assert "/v1/federations/{federation_id}/metrics" in paths
