"""Engines against the real coordinator app with ``rerandomize_distances`` switched on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from crypto.rng import DeterministicRandom
from participant import engine as engine_module
from participant import protocol
from participant.client import CoordinatorClient
from participant.engine import Engine
from participant.enrollment import enroll
from participant.state import StateDir
from tests.participant.test_engine import ADMIN, DIM, N_CTX, GroupTrainer, N, R, drive, http

__all__ = ["http"]


def _engines(client: TestClient, tmp_path: Path, rerandomize: bool) -> tuple[str, list[Engine]]:
    body: dict[str, Any] = {
        "name": "engine-rerandomize",
        "strategy": "secfpp",
        "n_participants": N,
        "prompt": {"n_ctx": N_CTX, "dim": DIM, "init_std": 0.02, "init_seed": 1},
        "tolerance": {
            "reduced_dim": R,
            "dropout_fraction": 0.375,
            "collusion_fraction": 0.125,
            "rerandomize_distances": rerandomize,
        },
        "rounds": {"warmup_rounds": 0, "lr_global": 1.0},
    }
    r = client.post("/v1/federations", json=body, headers=ADMIN)
    assert r.status_code == 201, r.text
    fid = r.json()["id"]
    assert r.json()["config"]["crypto"]["rerandomize_distances"] is rerandomize
    tokens = client.post(
        f"/v1/federations/{fid}/enrollment-tokens", json={"count": N}, headers=ADMIN
    ).json()["tokens"]
    engines = []
    for n, token in enumerate(tokens):
        state = StateDir(tmp_path / f"p{n}")
        api = CoordinatorClient(client)
        ident = enroll(
            api,
            state,
            coordinator_url="http://testserver",
            enrollment_token=token,
            display_name=f"org-{n}",
            ca_bundle=None,
            rng=DeterministicRandom(n),
        )
        engine = Engine(
            api,
            state,
            GroupTrainer(ident["index"]),
            rng=DeterministicRandom(f"e{n}"),
            sleep=lambda s: None,
        )
        engines.append(engine)
    return fid, engines


def test_rerandomized_rounds_publish_and_find_the_groups(
    http: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    added: list[tuple[int, ...]] = []

    def recording(task: Any, opened: Any, params: Any, zeros: Any = None) -> Any:
        assert zeros is not None, "a member answered without adding the zero-sharings"
        added.append(tuple(sorted(zeros.shares)))
        return protocol.distance_payload(task, opened, params, zeros=zeros)

    monkeypatch.setattr(engine_module, "distance_payload", recording)
    fid, engines = _engines(http, tmp_path, rerandomize=True)
    for _ in range(2):
        number = drive(http, fid, engines)
        status = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
        assert status["stage"] == "published", status["failure_reason"]
        for engine in engines:
            specs = engine.progress(number)["sharing_specs"]
            assert [s["kind"] for s in specs] == ["prompt", "zero", "update"]
            zero = specs[1]
            assert zero["context_stage"] == "sharing-zero"
            assert zero["vector_length"] == N * 2 * 8 + 28
    clusters = sorted(sorted(c["members"]) for c in status["next_clusters"])
    assert clusters == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert len(added) == 2 * N  # every member, both rounds, with every sender's contribution
    assert set(added) == {tuple(range(N))}


def test_without_the_switch_no_zero_envelopes_are_asked(http: TestClient, tmp_path: Path) -> None:
    fid, engines = _engines(http, tmp_path, rerandomize=False)
    number = drive(http, fid, engines)
    status = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
    assert status["stage"] == "published", status["failure_reason"]
    assert [s["kind"] for s in engines[0].progress(number)["sharing_specs"]] == [
        "prompt",
        "update",
    ]
