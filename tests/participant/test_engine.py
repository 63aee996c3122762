"""The participant engine against the real coordinator app (in-process HTTP)."""

from __future__ import annotations

import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from secfpp.coordinator.app import create_app
from secfpp.coordinator.settings import Settings
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.transport import KeyRing, public_key_bytes
from secfpp.participant.client import CoordinatorClient
from secfpp.participant.engine import Engine, TrainOutput
from secfpp.participant.enrollment import enroll
from secfpp.participant.state import StateDir, StateError
from secfpp.wire.messages import Task
from tests.crypto.counting_key import CountingKey
from tests.support.asgi import TestClient
from tests.support.common import ADMIN, ADMIN_TOKEN
from tests.support.federations import create_federation, federation_body

N = 8
N_CTX, DIM, R = 4, 8, 16


class GroupTrainer:
    """A stand-in for prompt learning: two groups of participants, fixed updates."""

    def __init__(self, index: int) -> None:
        self.index = index
        self.group = 0 if index < N // 2 else 1
        self.calls = 0
        self.local = np.zeros(3)
        self.adopted: list[np.ndarray | None] = []

    def train(self, round_number: int, global_prompt: np.ndarray | None) -> TrainOutput:
        self.calls += 1
        noise = DeterministicRandom(f"{self.index}|{round_number}").standard_normal(R) * 0.05
        reduced = (0.5 if self.group == 0 else -0.5) + noise
        update = np.full(N_CTX * DIM, 0.01 if self.group == 0 else -0.01)
        self.local = self.local + 1
        return TrainOutput(reduced, update, {"local": self.local}, {"loss": 1.0})

    def restore(self, state: dict[str, np.ndarray]) -> None:
        self.local = state["local"]

    def evaluate(self, global_prompt: np.ndarray | None) -> dict[str, float]:
        self.adopted.append(global_prompt)
        return {"accuracy": 0.5 + 0.1 * len(self.adopted)}


@pytest.fixture
def http(sqlite_template: Path, tmp_path: Path) -> Iterator[TestClient]:
    db = tmp_path / "coordinator.db"
    shutil.copy(sqlite_template, db)
    settings = Settings(database_url=f"sqlite:///{db}", admin_token=ADMIN_TOKEN)
    with TestClient(create_app(settings)) as client:
        yield client


def federation(
    http: TestClient,
    name: str = "engine-test",
    *,
    rounds: dict[str, Any] | None = None,
    **tolerance: Any,
) -> tuple[str, list[str]]:
    body = federation_body(
        name,
        n=N,
        n_ctx=N_CTX,
        dim=DIM,
        init_seed=1,
        reduced_dim=R,
        dropout_fraction=0.375,
        collusion_fraction=0.125,
        tolerance=tolerance,
        rounds=rounds,
    )
    return create_federation(http, body)


def make_engines(
    http: TestClient,
    tmp_path: Path,
    *,
    client_of: Callable[[TestClient], CoordinatorClient] = CoordinatorClient,
    **tolerance: Any,
) -> tuple[str, list[Engine]]:
    """A federation of N and one engine per participant, each on ``client_of(http)``."""
    fid, tokens = federation(http, **tolerance)
    return fid, enroll_engines(http, tmp_path, tokens, client_of=client_of)


def enroll_engines(
    http: TestClient,
    tmp_path: Path,
    tokens: list[str],
    *,
    client_of: Callable[[TestClient], CoordinatorClient] = CoordinatorClient,
) -> list[Engine]:
    """One enrolled engine per enrollment token (a :class:`GroupTrainer` each)."""
    engines = []
    for n, token in enumerate(tokens):
        state = StateDir(tmp_path / f"p{n}")
        client = client_of(http)
        ident = enroll(
            client,
            state,
            coordinator_url="http://testserver",
            enrollment_token=token,
            display_name=f"org-{n}",
            ca_bundle=None,
            rng=DeterministicRandom(n),
        )
        engines.append(
            Engine(
                client,
                state,
                GroupTrainer(ident["index"]),
                rng=DeterministicRandom(f"e{n}"),
                sleep=lambda s: None,
            )
        )
    return engines


def drive(http: TestClient, fid: str, engines: list[Engine], skip: set[int] = frozenset()) -> int:  # type: ignore[assignment]
    r = http.post(f"/v1/federations/{fid}/rounds", headers=ADMIN)
    assert r.status_code == 201, r.text
    number = int(r.json()["number"])
    for _ in range(12):
        for engine in engines:
            if engine.index not in skip:
                engine.step()
        if all(e.progress(number).get("outcome_done") for e in engines if e.index not in skip):
            break
    return number


@pytest.mark.slow  # over 7 s: left out of the inner loop (bash dev.sh quick)
def test_engines_complete_rounds_and_find_the_groups(http: TestClient, tmp_path: Path) -> None:
    fid, engines = make_engines(http, tmp_path)
    keys = []
    for engine in engines:
        assert isinstance(engine.key_ring, KeyRing)
        assert public_key_bytes(engine.key_ring.public_key()) == public_key_bytes(
            engine.private_key.public_key()
        )
        # The same key, counting its X25519 exchanges, wherever the engine holds it.
        key = CountingKey(engine.private_key)
        engine.private_key, engine.key_ring = key, KeyRing(key)
        keys.append(key)
    rings = [engine.key_ring for engine in engines]
    for _ in range(3):
        number = drive(http, fid, engines)
        status = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
        assert status["stage"] == "published", status["failure_reason"]
    for engine, ring, key in zip(engines, rings, keys, strict=True):
        # Sealing and opening went through one ring, kept across rounds: one exchange
        # per peer in three rounds, none per envelope.
        assert engine.key_ring is ring
        assert len(ring) >= N - 1
        assert key.exchanges == len(ring)
    clusters = sorted(sorted(c["members"]) for c in status["next_clusters"])
    assert clusters == [[0, 1, 2, 3], [4, 5, 6, 7]]
    for engine in engines:
        trainer = engine.trainer
        assert isinstance(trainer, GroupTrainer)
        assert trainer.calls == 3
        assert len(trainer.adopted) == 3
        assert (engine.state.root / "rounds/3/metrics.json").exists()
    reported = http.get(f"/v1/federations/{fid}/metrics", headers=ADMIN).json()["rounds"]
    assert [r["number"] for r in reported] == [1, 2, 3]
    for k, r in enumerate(reported, start=1):
        assert r["metrics"] == {str(i): {"accuracy": 0.5 + 0.1 * k} for i in range(N)}


@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
def test_restarted_engine_resends_identical_bytes_and_does_not_retrain(
    http: TestClient, tmp_path: Path
) -> None:
    fid, engines = make_engines(http, tmp_path)
    r = http.post(f"/v1/federations/{fid}/rounds", headers=ADMIN)
    number = int(r.json()["number"])
    first = engines[0]
    first.step()  # trains, seals and uploads its shares
    body = (first.state.root / f"rounds/{number}/shares.json").read_bytes()
    # "Crash": a new engine and trainer on the same state directory.
    trainer = GroupTrainer(first.index)
    again = Engine(CoordinatorClient(http), first.state, trainer, sleep=lambda s: None)
    assert trainer.local.tolist() == [1.0, 1.0, 1.0]  # restored from the committed round
    again._share(again.client.task(), number)  # replays the upload: accepted as identical
    assert trainer.calls == 0
    assert (first.state.root / f"rounds/{number}/shares.json").read_bytes() == body
    engines[0] = again
    for _ in range(12):
        for engine in engines:
            engine.step()
    status = http.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
    assert status["stage"] == "published"


def test_enroll_refuses_to_overwrite(http: TestClient, tmp_path: Path) -> None:
    _, tokens = federation(http)
    state = StateDir(tmp_path / "p")
    enroll(
        CoordinatorClient(http),
        state,
        coordinator_url="x",
        enrollment_token=tokens[0],
        display_name="a",
        ca_bundle=None,
    )
    with pytest.raises(StateError, match="already holds an enrollment"):
        enroll(
            CoordinatorClient(http),
            state,
            coordinator_url="x",
            enrollment_token=tokens[1],
            display_name="b",
            ca_bundle=None,
        )


def test_daemons_stop_when_the_final_round_ends_even_if_it_failed(
    http: TestClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fid, tokens = federation(http, "last-round", rounds={"total": 1, "warmup_rounds": 0})
    engines = []
    for n, token in enumerate(tokens):
        state = StateDir(tmp_path / f"p{n}")
        client = CoordinatorClient(http)
        ident = enroll(
            client,
            state,
            coordinator_url="http://testserver",
            enrollment_token=token,
            display_name=f"org-{n}",
            ca_bundle=None,
            rng=DeterministicRandom(n),
        )
        engines.append(Engine(client, state, GroupTrainer(ident["index"]), sleep=lambda s: None))
    assert http.post(f"/v1/federations/{fid}/rounds", headers=ADMIN).status_code == 201
    engines[0].step()  # one daemon shares; then the admin gives the round up
    r = http.post(f"/v1/federations/{fid}/rounds/1/abort", json={"reason": "test"}, headers=ADMIN)
    assert r.status_code == 200, r.text
    polls = 0
    real_task = CoordinatorClient.task

    def counted(self: CoordinatorClient) -> Task:
        nonlocal polls
        polls += 1
        assert polls < 10 * N, "a daemon kept polling a federation that is over"
        return real_task(self)

    monkeypatch.setattr(CoordinatorClient, "task", counted)
    for engine in engines:  # the last round is over: each run returns at once
        assert engine.run() == 1
        assert engine.progress(1)["outcome_stage"] == "aborted"
    assert polls == N
