"""Refusals name whom they blame; a sender blamed by enough peers is dropped, not them.

The end-to-end cases run the real participant engine (with a stand-in trainer) against
the coordinator app on both databases: one participant whose ``x25519.key`` is not the
key it enrolled with seals shares nobody can open and cannot open anybody's; its peers
refuse, blaming it, and the round finishes among the others, in a warmup round (the
aggregation stage convicts it) and in a clustering round (the distance stage does).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfpp.coordinator.app import create_app
from secfpp.coordinator.rounds.refusals import accusation_quorum, convicted_senders
from secfpp.coordinator.settings import Settings
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.transport import generate_keypair, private_key_bytes
from secfpp.federation import FederationCreate
from secfpp.participant.client import CoordinatorClient
from secfpp.participant.engine import Engine
from secfpp.participant.enrollment import enroll
from secfpp.participant.state import StateDir
from tests.support.asgi import TestClient
from tests.support.common import ADMIN, ADMIN_TOKEN
from tests.support.federations import create_federation, federation_body
from tests.support.trainers import FixedTrainer, group_of

N, N_CTX, DIM, R = 8, 4, 8, 16
BAD = 3


def test_conviction_needs_the_quorum_of_distinct_peers() -> None:
    assert convicted_senders([(0, [3]), (0, [3])], excluded=(), quorum=2) == set()
    assert convicted_senders([(0, [3]), (1, [3])], excluded=(), quorum=2) == {3}
    # Accusations of dropped participants do not count, nor does blaming oneself.
    assert convicted_senders([(5, [0]), (1, [0])], excluded={5}, quorum=2) == set()
    assert convicted_senders([(0, [3]), (1, [3])], excluded={3}, quorum=2) == set()
    assert convicted_senders([(0, [0]), (1, [0])], excluded=(), quorum=2) == set()
    with pytest.raises(ValueError, match="quorum must be at least 1, not 0"):
        convicted_senders([], excluded=(), quorum=0)


@given(
    st.lists(st.tuples(st.integers(0, 9), st.lists(st.integers(0, 9), max_size=4)), max_size=30),
    st.integers(1, 4),
)
def test_conviction_matches_a_direct_count(
    accusations: list[tuple[int, list[int]]], quorum: int
) -> None:
    got = convicted_senders(accusations, excluded={9}, quorum=quorum)
    for sender in range(10):
        accusers = {a for a, accused in accusations if sender in accused and a not in (9, sender)}
        assert (sender in got) == (sender != 9 and len(accusers) >= quorum)


def test_quorum_outnumbers_the_colluders() -> None:
    config = FederationCreate(name="q", n_participants=16).resolve()
    t = max(config.crypto.clustering_code.t, config.crypto.aggregation_code.t)
    assert accusation_quorum(config) == max(2, t + 1)


@pytest.fixture
def http(db_url: str) -> Iterator[TestClient]:
    settings = Settings(database_url=db_url, admin_token=ADMIN_TOKEN, tick_interval_s=60)
    with TestClient(create_app(settings)) as client:
        yield client


def _federation(http: TestClient, warmup: int) -> tuple[str, list[str]]:
    body = federation_body(
        "refusal-test",
        n=N,
        n_ctx=N_CTX,
        dim=DIM,
        init_seed=1,
        init_std=0.0,
        reduced_dim=R,
        dropout_fraction=0.375,
        collusion_fraction=0.125,
        rounds={"warmup_rounds": warmup, "lr_global": 1.0},
    )
    return create_federation(http, body)


def _engines(http: TestClient, tmp_path: Path, warmup: int) -> tuple[str, list[Engine]]:
    fid, tokens = _federation(http, warmup)
    engines = []
    for n, token in enumerate(tokens):
        state = StateDir(tmp_path / f"p{n}")
        ident = enroll(
            CoordinatorClient(http),
            state,
            coordinator_url="http://testserver",
            enrollment_token=token,
            display_name=f"org-{n}",
            ca_bundle=None,
            rng=DeterministicRandom(n),
        )
        if ident["index"] == BAD:  # a damaged or foreign key: not the one it enrolled with
            foreign = generate_keypair(DeterministicRandom("foreign"))
            state.write_bytes(StateDir.KEY, private_key_bytes(foreign.private))
        trainer = FixedTrainer(ident["index"], reduced_dim=R, prompt_size=N_CTX * DIM)
        engines.append(
            Engine(
                CoordinatorClient(http),
                state,
                trainer,
                rng=DeterministicRandom(f"e{n}"),
                sleep=lambda s: None,
            )
        )
    return fid, sorted(engines, key=lambda e: e.index)


def _play(http: TestClient, fid: str, engines: list[Engine]) -> dict[str, Any]:
    r = http.post(f"/v1/federations/{fid}/rounds", headers=ADMIN)
    assert r.status_code == 201, r.text
    number = int(r.json()["number"])
    for _ in range(10):
        for engine in engines:
            engine.step()
        status: dict[str, Any] = http.get(
            f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN
        ).json()
        if status["stage"] in ("published", "failed", "aborted"):
            for engine in engines:
                engine.step()  # the daemons see the round ended and fetch its outcome
            return status
    raise AssertionError(f"round {number} did not finish: {status['stage']}")


def _refusals(status: dict[str, Any]) -> list[dict[str, Any]]:
    return [e["detail"] for e in status["events"] if e["kind"] == "refusal"]


@pytest.mark.parametrize(("warmup", "stage"), [(1, "aggregation"), (0, "distances")])
def test_a_participant_with_a_wrong_key_is_dropped_and_the_round_finishes(
    http: TestClient, tmp_path: Path, warmup: int, stage: str
) -> None:
    fid, engines = _engines(http, tmp_path, warmup)
    status = _play(http, fid, engines)
    assert status["stage"] == "published", status["failure_reason"]
    assert status["dropped"] == {str(BAD): stage}
    refusals = _refusals(status)
    convicting = [d for d in refusals if d.get("convicted")]
    assert [d["convicted"] for d in convicting] == [[BAD]]
    honest = [d for d in refusals if d["participant"] != BAD]
    assert honest
    assert all(d["accused"] == [BAD] for d in honest)
    assert all("failed authentication" in d["message"] for d in honest)
    assert all(d["reason"] == "missing_share" for d in honest)
    # Every honest participant answered the request planned without the broken one.
    others = [i for i in range(N) if i != BAD]
    assert status["uploads"]["aggregation"] == others
    if stage == "distances":
        assert status["uploads"]["distances"] == others
    # The published prompt is generation 0 (zeros) plus the mean of the honest updates.
    expected = {0: 0.01, 1: -0.01}
    for engine in engines:
        if engine.index == BAD:
            continue
        cluster_members = next(
            c["members"] for c in status["clusters"] if engine.index in c["members"]
        )
        contributors = [i for i in cluster_members if i != BAD]
        mean = np.mean([expected[group_of(i)] for i in contributors])
        prompt = engine.state.read_array("rounds/1/global.npy")
        assert prompt is not None
        np.testing.assert_allclose(prompt, np.full((N_CTX, DIM), mean), atol=1e-6)


def test_a_refusal_blaming_nobody_drops_the_refuser(http: TestClient, tmp_path: Path) -> None:
    fid, engines = _engines(http, tmp_path, warmup=1)
    r = http.post(f"/v1/federations/{fid}/rounds", headers=ADMIN)
    number = int(r.json()["number"])
    for engine in engines:
        engine.step()  # shares: the round moves on to aggregation
    r = http.post(
        f"/v1/participants/me/rounds/{number}/refusals",
        json={"reason": "overlapping_sets", "message": "sets overlap", "senders": [0]},
        headers={"Authorization": f"Bearer {engines[0].client.token}"},
    )
    assert r.status_code == 200, r.text
    status = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
    # Blaming only itself is blaming nobody: it is out, nobody else is.
    assert status["dropped"] == {"0": "aggregation"}
    assert _refusals(status)[-1]["accused"] == []
    assert _refusals(status)[-1]["reason"] == "overlapping_sets"
