"""The committee suite's kit: a federation of ``N = 12`` with a forced committee of
``c = 7`` whose participants are production engines over one in-process client, and the
grid trainer whose sums are exact (see ``tests/committee/conftest.py``)."""

from __future__ import annotations

import base64
import copy
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import httpx
import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.rng import DeterministicRandom
from secfpp.participant.client import CoordinatorClient, RetryPolicy
from secfpp.participant.engine import Engine, TrainOutput
from secfpp.participant.enrollment import enroll
from secfpp.participant.state import StateDir
from tests.support import federations
from tests.support.asgi import TestClient
from tests.support.common import ADMIN, FakeClock
from tests.support.coordinator import assert_problem

N, C, N_CTX, DIM, R = 12, 7, 2, 8, 8
GRID = 2.0**-8
ENDED = ("published", "failed", "aborted")


def group_of(index: int) -> int:
    """Participants ``0..5`` form group 0, ``6..11`` group 1."""
    return 0 if index < N // 2 else 1


def reduced_vector(index: int, round_number: int) -> NDArray[np.float64]:
    """``x_i``: ``+-0.5`` by group plus a little noise of a public seed, shape ``(R,)``."""
    sign = 1.0 if group_of(index) == 0 else -1.0
    noise = DeterministicRandom(f"x|{index}|{round_number}").standard_normal(R)
    return np.asarray(sign * 0.5 + 0.05 * noise, dtype=np.float64)


def update_vector(index: int, round_number: int) -> NDArray[np.float64]:
    """``g_i``: integers in ``[-8, 8]`` times ``2^-8``, shape ``(N_CTX * DIM,)``."""
    ints = np.random.default_rng([index, round_number]).integers(-8, 9, N_CTX * DIM)
    return np.asarray(ints * GRID, dtype=np.float64)


class GridTrainer:
    """Deterministic stand-in for prompt learning (module docstring)."""

    def __init__(self, index: int) -> None:
        self.index = index

    def train(self, round_number: int, global_prompt: NDArray[np.float64] | None) -> TrainOutput:
        return TrainOutput(
            reduced_vector(self.index, round_number),
            update_vector(self.index, round_number),
            {"local": np.zeros(1)},
            {"loss": 1.0},
        )

    def restore(self, state: dict[str, NDArray[Any]]) -> None:
        pass

    def evaluate(self, global_prompt: NDArray[np.float64] | None) -> dict[str, float]:
        return {"accuracy": 0.5}


def federation_body(**tolerance: Any) -> dict[str, Any]:
    """N = 12 with a forced committee of C = 7; ``tolerance`` adds tolerance keys."""
    return federations.federation_body(
        "committee",
        n=N,
        n_ctx=N_CTX,
        dim=DIM,
        init_seed=5,
        reduced_dim=R,
        dropout_fraction=0.25,
        collusion_fraction=0.2,
        tolerance={
            "min_aggregation_size": 2,
            "max_clusters": 3,
            "committee_size": C,
            **tolerance,
        },
        deadline_s=60,
        operators_see_distances=True,
    )


def _coordinator(client: TestClient) -> CoordinatorClient:
    """A daemon's client over the in-process app: no waits between its few retries."""
    http = cast(httpx.Client, client)  # a TestClient is an httpx.Client
    retry = RetryPolicy(base_s=0.01, cap_s=0.01, max_attempts=3)
    return CoordinatorClient(http, retry=retry, sleep=lambda _s: None)


def _engine(coordinator: CoordinatorClient, state: StateDir) -> Engine:
    """The production engine of the enrolled ``state``, driven one step at a time."""
    index = int(state.identity()["index"])
    return Engine(
        coordinator,
        state,
        GridTrainer(index),
        rng=DeterministicRandom(f"shares-{index}"),
        poll_s=0.0,
        sleep=lambda _s: None,
        on_progress=lambda _text: None,
    )


class CommitteeFederation(federations.AdminRounds):
    """A federation and one production engine per participant, on one in-process client."""

    def __init__(self, client: TestClient, clock: FakeClock, root: Path, **tolerance: Any) -> None:
        self.client, self.clock, self.root = client, clock, root
        r = client.post("/v1/federations", json=federation_body(**tolerance), headers=ADMIN)
        assert r.status_code == 201, r.text
        self.federation = r.json()
        self.id: str = self.federation["id"]
        r = client.post(
            f"/v1/federations/{self.id}/enrollment-tokens", json={"count": N}, headers=ADMIN
        )
        assert r.status_code == 201, r.text
        self.engines: dict[int, Engine] = {}
        for n, token in enumerate(r.json()["tokens"]):
            state = StateDir(root / f"p{n}")
            coordinator = _coordinator(client)
            identity = enroll(
                coordinator,
                state,
                coordinator_url=str(client.base_url),
                enrollment_token=token,
                display_name=f"org-{n}",
                ca_bundle=None,
                rng=DeterministicRandom(f"key-{n}"),
            )
            index = int(identity["index"])
            self.engines[index] = _engine(coordinator, state)

    def twin(self, client: TestClient, clock: FakeClock, root: Path) -> CommitteeFederation:
        """This federation on ``client`` and ``clock``, whose database is a copy of this
        one's (nothing is sent): the participants' state folders copied to ``root`` and an
        engine on each, built as at enrollment. Only for a federation none of whose engines
        has stepped yet (an engine keeps a little state in memory between steps)."""
        assert all(not e._handled and e._beacon_log is None for e in self.engines.values())
        shutil.copytree(self.root, root)
        twin = object.__new__(type(self))
        twin.client, twin.clock, twin.root = client, clock, root
        twin.federation = copy.deepcopy(self.federation)
        twin.id = self.id
        twin.engines = {
            index: _engine(_coordinator(client), StateDir(root / engine.state.root.name))
            for index, engine in self.engines.items()
        }
        return twin

    def task(self, index: int) -> dict[str, Any]:
        """Participant ``index``'s current task, as the JSON document."""
        return self.engines[index].client.task().model_dump(mode="json")

    # -- participants --------------------------------------------------------------------
    def act(self, skip: set[int] | frozenset[int] = frozenset()) -> None:
        """Every participant not in ``skip`` does its current task once; those left
        waiting for their quorum of attestations (agreement on a coded stage's request,
        docs/protocol.md section 7) poll again once everybody attested: the stage's extra
        round trip."""
        for index, engine in sorted(self.engines.items()):
            if index not in skip:
                engine.step()
        for index, engine in sorted(self.engines.items()):
            if index not in skip and engine._waiting is not None:
                engine.step()

    def run_round(
        self,
        skip: dict[str, set[int]] | None = None,
        *,
        number: int | None = None,
        watch: Callable[[str, int], None] = lambda _stage, _number: None,
    ) -> int:
        """Drive a round to its end; ``skip[stage]`` stay silent in that stage, and the
        clock passes the stage's deadline when it does not close without them.
        ``watch(stage, number)`` runs before each pass."""
        skip = skip or {}
        number = self.start_round() if number is None else number
        for _ in range(12):
            stage = str(self.status(number)["stage"])
            if stage in ENDED:
                self.act()  # fetch the outcome
                return number
            watch(stage, number)
            self.act(skip.get(stage, set()))
            if str(self.status(number)["stage"]) == stage and skip.get(stage):
                self.clock.advance(61)
                self.status(number)  # a read drives the overdue stage
        raise AssertionError(f"round {number} did not end: {self.status(number)['stage']}")

    def prompts(self, number: int) -> dict[int, NDArray[np.float64]]:
        """Cluster id -> the global prompt round ``number`` published (flat float64)."""
        out: dict[int, NDArray[np.float64]] = {}
        for engine in self.engines.values():
            outcome = engine.client.outcome(number)
            if outcome.global_prompt is not None and outcome.cluster is not None:
                raw = outcome.global_prompt.data
                out[outcome.cluster] = np.frombuffer(base64.b64decode(raw), dtype="<f8")
        return out


class Kit:
    """What the committee tests use (test modules cannot import this conftest)."""

    ADMIN = ADMIN
    N, C, R, GRID = N, C, R, GRID
    federation_body = staticmethod(federation_body)
    group_of = staticmethod(group_of)
    reduced_vector = staticmethod(reduced_vector)
    update_vector = staticmethod(update_vector)
    problem = staticmethod(assert_problem)


def enrolled(client: TestClient, clock: FakeClock, root: Path) -> CommitteeFederation:
    """The committee suite's federation, just enrolled: the recipe of its ``federation``
    fixture, built once per backend and session (tests/support/frozen.py)."""
    return CommitteeFederation(client, clock, root / "states")


FROZEN = {"federation": enrolled}
"""The committee suite's frozen fixtures (fixture name -> recipe)."""
