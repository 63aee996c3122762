"""Engines against the real coordinator app with distance-stage DP noise on (issue 26 item 2).

The switch implies the re-randomized distance stage; every member's contribution carries
its noise; rounds still publish and find the two groups; each clustering round leaves one
``"distance"`` record in the privacy ledger covering every present participant.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from secfpp.crypto.dp.ledger import LedgerRecord, epsilon_spent
from secfpp.crypto.rng import DeterministicRandom
from secfpp.participant import protocol
from tests.participant.test_engine import ADMIN, DIM, N_CTX, N, R, drive, enroll_engines, http
from tests.support.asgi import TestClient
from tests.support.wire import task_of

__all__ = ["http"]


def _federation(http: TestClient, dp: dict[str, Any]) -> tuple[str, list[str]]:
    body: dict[str, Any] = {
        "name": "distance-noise",
        "strategy": "secfpp",
        "n_participants": N,
        "backbone": None,
        "prompt": {"n_ctx": N_CTX, "dim": DIM, "init_std": 0.02, "init_seed": 1},
        "tolerance": {"reduced_dim": R, "dropout_fraction": 0.375, "collusion_fraction": 0.125},
        "rounds": {"warmup_rounds": 0, "lr_global": 1.0},
        "dp": dp,
    }
    r = http.post("/v1/federations", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    fid = r.json()["id"]
    r = http.post(f"/v1/federations/{fid}/enrollment-tokens", json={"count": N}, headers=ADMIN)
    return fid, r.json()["tokens"]


def _ledger(db_path: Path) -> list[LedgerRecord]:
    with sqlite3.connect(db_path) as db:
        rows = db.execute("SELECT record FROM privacy_ledger").fetchall()
    return [LedgerRecord.from_dict(json.loads(r[0])) for r in rows]


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_noisy_rounds_publish_find_the_groups_and_fill_the_ledger(
    http: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    drawn: list[int] = []
    real_share = protocol.DistanceNoise.share

    def counting(self: Any, length: int, *, rng: Any) -> Any:
        drawn.append(length)
        return real_share(self, length, rng=rng)

    monkeypatch.setattr(protocol.DistanceNoise, "share", counting)
    fid, tokens = _federation(http, {"distance_noise_multiplier": 0.001, "distance_l2_clip": 2.5})
    config = http.get(f"/v1/federations/{fid}", headers=ADMIN).json()["config"]
    assert config["crypto"]["rerandomize_distances"] is True  # implied by the noise
    assert config["dp"]["distance_noise_multiplier"] == 0.001
    engines = enroll_engines(http, tmp_path, tokens)
    for _ in range(2):
        number = drive(http, fid, engines)
        status = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
        assert status["stage"] == "published", status["failure_reason"]
    assert len(drawn) == 2 * N  # every member drew noise in both rounds
    clusters = sorted(sorted(c["members"]) for c in status["next_clusters"])
    assert clusters == [[0, 1, 2, 3], [4, 5, 6, 7]]
    records = [r for r in _ledger(tmp_path / "coordinator.db") if r.kind == "distance"]
    assert [r.round for r in records] == [1, 2]
    assert all(r.participants == tuple(range(N)) for r in records)
    assert epsilon_spent(records, delta=1e-5, method="rdp") > 0


def test_distance_noise_is_refused_without_a_distance_stage(http: TestClient) -> None:
    body = {
        "name": "x",
        "strategy": "promptfl",
        "n_participants": N,
        "backbone": None,
        "prompt": {"n_ctx": N_CTX, "dim": DIM},
        "dp": {"distance_noise_multiplier": 1.0},
    }
    r = http.post("/v1/federations", json=body, headers=ADMIN)
    assert r.status_code == 422
    assert "dp.distance_noise_multiplier needs strategy 'secfpp'" in r.text


def test_share_body_refuses_a_task_that_strips_the_noise_carrier() -> None:
    task = {"sharing": {"envelopes": [{"kind": "prompt"}, {"kind": "update"}], "recipients": []}}
    noise = protocol.DistanceNoise(
        noise_multiplier=1.0,
        l2_clip=1.0,
        bits=4,
        reduced_dim=4,
        min_reference=3,
        min_contributors=3,
    )
    with pytest.raises(ValueError, match="asks for no 'zero' contribution"):
        protocol.share_body(
            task_of({**task, "peers": [], "round": 1}),
            params=None,  # type: ignore[arg-type]
            federation_id="f",
            index=0,
            private_key=None,  # type: ignore[arg-type]
            reduced=None,
            update=None,
            rng=DeterministicRandom(0),
            distance_noise=noise,
        )


def test_a_round_whose_distance_release_tops_the_budget_is_refused_at_start(
    http: TestClient, tmp_path: Path
) -> None:
    """The budget check at a round's start includes the distance release (a bound of it:
    the request is fixed only after sharing); before, round 1 ran and overspent."""
    dp = {"distance_noise_multiplier": 0.001, "distance_l2_clip": 2.5, "epsilon_budget": 100.0}
    fid, tokens = _federation(http, dp)
    enroll_engines(http, tmp_path, tokens)
    r = http.post(f"/v1/federations/{fid}/rounds", headers=ADMIN)
    assert r.status_code == 409, r.text
    assert r.json()["code"] == "privacy_budget_exceeded"
    assert "above epsilon_budget=100" in r.json()["detail"]
    assert not [x for x in _ledger(tmp_path / "coordinator.db") if x.kind == "distance"]


def test_a_budget_the_distance_release_fits_lets_the_round_run(
    http: TestClient, tmp_path: Path
) -> None:
    dp = {"distance_noise_multiplier": 64.0, "distance_l2_clip": 2.5, "epsilon_budget": 50.0}
    fid, tokens = _federation(http, dp)
    engines = enroll_engines(http, tmp_path, tokens)
    number = drive(http, fid, engines)
    status = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
    assert status["stage"] == "published", status["failure_reason"]
    records = [x for x in _ledger(tmp_path / "coordinator.db") if x.kind == "distance"]
    assert [x.round for x in records] == [1]
    assert epsilon_spent(records, delta=1e-5, method="pld") <= 50.0
