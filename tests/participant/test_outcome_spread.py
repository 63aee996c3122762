"""The end-of-round burst, spread (issue 30): a federation larger than the coordinator's
``outcome_rate`` fetches a published round's outcome over ``N / outcome_rate`` seconds, each
participant at its slot (``outcome_after_s``); the daemon waits for its slot and then
fetches. At N = 1,000 every daemon used to fetch the outcome and report its metrics within
one poll interval of the publication, and the task polls queued 8 to 15 s behind those
2,000 requests (docs/results/load.md)."""

from __future__ import annotations

import itertools
import shutil
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfpp.coordinator.app import create_app
from secfpp.coordinator.rounds.views import MAX_POLL_AFTER_S, outcome_after
from secfpp.coordinator.settings import Settings
from tests.participant.test_engine import ADMIN, N, make_engines
from tests.support.asgi import TestClient
from tests.support.common import ADMIN_TOKEN, FakeClock

RATE = 2.0  # N = 8 participants: their slots spread over 4 s


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def spread(sqlite_template: Path, tmp_path: Path, clock: FakeClock) -> Iterator[TestClient]:
    db = tmp_path / "coordinator.db"
    shutil.copy(sqlite_template, db)
    settings = Settings(database_url=f"sqlite:///{db}", admin_token=ADMIN_TOKEN, outcome_rate=RATE)
    with TestClient(create_app(settings, clock=clock)) as client:
        yield client


def test_slots_spread_evenly_after_publication() -> None:
    at = datetime(2026, 11, 29, tzinfo=UTC)
    roster = list(range(1000))
    slots = [outcome_after(roster, i, at, at, 25.0) for i in roster]
    assert slots[0] == 0.0
    assert slots[-1] == pytest.approx(40 * 999 / 1000)  # W = N / rate = 40 s
    assert slots == sorted(slots)
    assert all(b - a == pytest.approx(0.04, abs=1e-3) for a, b in itertools.pairwise(slots))
    later = at + timedelta(seconds=20)
    assert outcome_after(roster, 400, at, later, 25.0) == 0.0  # its slot (16 s) has passed
    assert outcome_after(roster, 600, at, later, 25.0) == pytest.approx(4.0)
    # small federations, strangers and rounds without a finish time: nobody waits
    assert outcome_after(list(range(25)), 24, at, at, 25.0) == 0.0
    assert outcome_after(roster, 5000, at, at, 25.0) == 0.0
    assert outcome_after(roster, 999, None, at, 25.0) == 0.0


@given(
    n=st.integers(min_value=1, max_value=1024),
    rate=st.floats(min_value=0.5, max_value=500),
    elapsed=st.floats(min_value=0, max_value=100),
)
def test_no_slot_lies_beyond_the_window(n: int, rate: float, elapsed: float) -> None:
    at = datetime(2026, 11, 29, tzinfo=UTC)
    now = at + timedelta(seconds=elapsed)
    window = n / rate
    for me in {0, n // 2, n - 1}:
        wait = outcome_after(list(range(n)), me, at, now, rate)
        assert 0.0 <= wait <= max(0.0, window - elapsed) + 1e-3


@pytest.mark.slow  # about 3 s: out of the inner loop (bash dev.sh quick)
def test_daemons_wait_for_their_slot_then_fetch(
    spread: TestClient, tmp_path: Path, clock: FakeClock
) -> None:
    fid, engines = make_engines(spread, tmp_path)
    r = spread.post(f"/v1/federations/{fid}/rounds", headers=ADMIN)
    assert r.status_code == 201, r.text
    number = int(r.json()["number"])
    for _ in range(12):  # the clock stands still: the round runs, nobody's slot but 0's
        for engine in engines:
            engine.step()
    status = spread.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
    assert status["stage"] == "published", status["failure_reason"]
    tasks = [engine.client.task() for engine in engines]
    waits = [t.outcome_after_s for t in tasks]
    assert waits == pytest.approx([(N / RATE) * k / N for k in range(N)])  # 0, 0.5 .. 3.5 s
    assert [t.poll_after_s for t in tasks[1:]] == waits[1:]  # the next poll at the slot
    assert all(w <= MAX_POLL_AFTER_S for w in waits)
    done = [bool(e.progress(number).get("outcome_done")) for e in engines]
    assert done == [True] + [False] * (N - 1)  # only the first slot was due
    clock.advance(2.0)  # slots 0 .. 2 s are due
    for engine in engines:
        engine.step()
    done = [bool(e.progress(number).get("outcome_done")) for e in engines]
    assert done == [True] * 5 + [False] * 3
    clock.advance(2.0)
    for engine in engines:
        engine.step()
    assert all(e.progress(number).get("outcome_done") for e in engines)
    metrics = spread.get(f"/v1/federations/{fid}/rounds/{number}", headers=ADMIN).json()
    assert sorted(int(i) for i in metrics["metrics"]) == list(range(N))  # every report arrived
