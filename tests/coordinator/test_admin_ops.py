"""Admin round control, policy refusals, warmup, DP budget, refusals and ops routes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from secfpp.coordinator.app import create_app
from secfpp.coordinator.settings import Settings
from secfpp.crypto.dp import epsilon_for
from tests.support.asgi import TestClient
from tests.support.common import ADMIN
from tests.support.coordinator import federation_request


def test_health_ready_and_docs(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["status"] == "ready"
    assert client.get("/docs").status_code == 200
    schema = client.get("/openapi.json").json()
    assert "/v1/participants/me/task" in schema["paths"]
    upload = schema["paths"]["/v1/participants/me/rounds/{number}/shares"]["post"]
    assert "application/problem+json" in upload["responses"]["422"]["content"]
    create = schema["paths"]["/v1/federations"]["post"]
    assert "examples" in create["requestBody"]["content"]["application/json"]
    results = schema["paths"]["/v1/participants/me/rounds/{number}/results/{stage}"]["post"]
    assert set(results["requestBody"]["content"]) == {
        "application/json",
        "application/octet-stream",
    }


def test_readyz_reports_an_unmigrated_database(tmp_path: Path, problem: Any) -> None:
    settings = Settings(database_url=f"sqlite:///{tmp_path / 'empty.db'}", admin_token="a")
    with TestClient(create_app(settings)) as client:
        problem(client.get("/readyz"), 503, "not_ready")


def test_migrate_on_startup(tmp_path: Path) -> None:
    settings = Settings(
        database_url=f"sqlite:///{tmp_path / 'fresh.db'}", admin_token="a", migrate_on_startup=True
    )
    with TestClient(create_app(settings)) as client:
        assert client.get("/readyz").status_code == 200


def test_metrics_after_a_round(harness: Any) -> None:
    harness.run_round()
    text = harness.client.get("/metrics").text
    assert 'secfpp_rounds{stage="published"} 1' in text
    assert 'secfpp_uploads_total{kind="shares"} 8' in text
    assert 'secfpp_uploads_total{kind="distances"} 8' in text
    assert 'secfpp_decode_seconds_count{stage="aggregation"} 1' in text
    assert 'secfpp_transitions_total{to="published"} 1' in text
    assert "# TYPE secfpp_dropouts_total counter" in text


def test_round_control(harness: Any, problem: Any) -> None:
    h = harness
    number = h.start_round()
    sim = h.sims[0]
    body = sim.share_body(sim.task())
    problem(
        h.client.post(f"/v1/federations/{h.id}/rounds", headers=ADMIN), 409, "round_in_progress"
    )
    aborted = h.client.post(
        f"/v1/federations/{h.id}/rounds/{number}/abort", json={"reason": "test"}, headers=ADMIN
    )
    assert aborted.status_code == 200
    assert aborted.json()["stage"] == "aborted"
    assert aborted.json()["failure_reason"] == "aborted: test"
    again = h.client.post(f"/v1/federations/{h.id}/rounds/{number}/abort", headers=ADMIN)
    problem(again, 409, "round_finished")
    problem(
        h.client.post(
            f"/v1/participants/me/rounds/{number}/shares",
            json=body,
            headers=sim.headers,
        ),
        409,
        "wrong_stage",
    )
    assert h.run_round() == number + 1
    problem(h.client.get(f"/v1/federations/{h.id}/rounds/9", headers=ADMIN), 404, "round_not_found")
    problem(h.client.get("/v1/federations/nope", headers=ADMIN), 404, "federation_not_found")
    listed = h.client.get("/v1/federations", headers=ADMIN).json()["items"]
    assert [f["current_round"] for f in listed] == [number + 1]


def test_a_round_needs_every_participant_enrolled(client: TestClient, problem: Any) -> None:
    fed = client.post(
        "/v1/federations",
        json={"name": "half", "n_participants": 4, "rounds": {"total": 1}},
        headers=ADMIN,
    ).json()
    assert fed["config"]["crypto"]["clustering_code"]["t"] >= 1
    problem(
        client.post(f"/v1/federations/{fed['id']}/rounds", headers=ADMIN),
        409,
        "enrollment_incomplete",
    )


def test_rounds_exhausted(make_harness: Any, client: TestClient, problem: Any) -> None:
    h = make_harness(client, rounds={"total": 1, "warmup_rounds": 0})
    h.run_round()
    problem(client.post(f"/v1/federations/{h.id}/rounds", headers=ADMIN), 409, "rounds_exhausted")


def test_warmup_round_skips_the_distance_stage(make_harness: Any, client: TestClient) -> None:
    h = make_harness(client, rounds={"warmup_rounds": 1})
    number = h.start_round()
    task = h.sims[0].task()
    assert [e["kind"] for e in task["sharing"]["envelopes"]] == ["update"]
    h.act()
    assert h.stage(number) == "aggregation"
    h.act()
    status = h.status(number)
    assert status["stage"] == "published"
    assert status["clustering"] is False
    assert status["next_clusters"] is None
    assert [e["to_stage"] for e in status["events"]] == ["sharing", "aggregation", "published"]
    follow = h.start_round()
    assert h.status(follow)["clustering"] is True


def test_privacy_budget_refuses_the_round_that_would_exceed_it(
    make_harness: Any, client: TestClient, problem: Any
) -> None:
    z, delta = 2.0, 1e-5
    one, two = (epsilon_for(z, rounds=r, delta=delta) for r in (1, 2))
    h = make_harness(
        client,
        dp={
            "mechanism": "gaussian",
            "noise_multiplier": z,
            "delta": delta,
            "epsilon_budget": (one + two) / 2,
        },
    )
    h.run_round()
    assert h.stage(1) == "published"
    refused = client.post(f"/v1/federations/{h.id}/rounds", headers=ADMIN)
    assert "epsilon_budget" in problem(refused, 409, "privacy_budget_exceeded")["detail"]


def test_a_refusal_drops_the_participant_for_the_round(harness: Any) -> None:
    h = harness
    number = h.start_round()
    h.act()
    refusal = h.client.post(
        f"/v1/participants/me/rounds/{number}/refusals",
        json={"reason": "overlapping_sets", "message": "sets overlap"},
        headers=h.sims[3].headers,
    )
    assert refusal.status_code == 200
    assert h.sims[3].task()["action"] == "dropped"
    h.act(skip={3})
    h.act(skip={3})
    status = h.status(number)
    assert status["stage"] == "published", status
    assert status["dropped"] == {"3": "distances"}
    kinds = [e["kind"] for e in status["events"]]
    assert "refusal" in kinds


def test_split_rule_is_configurable_and_validated(
    client: TestClient, make_harness: Any, problem: Any, snapshot: Any
) -> None:
    """The split rule's false-split rate, null draws and trimming are settings; bad
    values: 422."""
    before = snapshot()
    for bad in (
        {"false_split_rate": 0},
        {"false_split_rate": 0.9},
        {"null_draws": 5},
        {"undo_after": 1},
        {"max_trim": 9},
        {"trim_factor": 1.0},
        {"split_rule": "nearest", "unknown": 1},
    ):
        r = client.post("/v1/federations", json=federation_request(clustering=bad), headers=ADMIN)
        problem(r, 422, "invalid_request")
    assert snapshot() == before
    h = make_harness(client, clustering={"false_split_rate": 0.05, "null_draws": 99})
    first = h.status(h.run_round())
    detail = next(e["detail"] for e in first["events"] if "split_ratios" in e["detail"])
    assert set(detail["split_ratios"]) == {"0"}
    assert detail["decoded_distances"] > 0
    assert sorted(sorted(c["members"]) for c in first["next_clusters"]) == [
        [0, 1, 2, 3],
        [4, 5, 6, 7],
    ]
