"""Rounds on autopilot, pause/resume, abort and the federation's end (in-process app).

The app's deadline tick (every 0.2 s) runs the autopilot; the simulated participants act
on their tasks; after the federation is created the tests make no admin call except the
one under test (pause, resume, abort). The clock is fake: ``min_interval_s`` waits only
when the test advances it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import pytest
from sqlalchemy import func, select

from secfpp.coordinator.db.engine import make_engine, make_sessionmaker
from secfpp.coordinator.db.models import Federation, Round, RoundEvent
from secfpp.coordinator.metrics import Metrics
from secfpp.coordinator.rounds import autopilot
from secfpp.coordinator.rounds.driver import RoundDriver
from secfpp.coordinator.rounds.views import outcome_window
from secfpp.crypto.dp import epsilon_for
from tests.support.asgi import TestClient
from tests.support.common import ADMIN, FakeClock
from tests.support.coordinator import FederationHarness

ENDED = ("published", "failed", "aborted")


def _until(what: Callable[[], Any], timeout_s: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = what()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError("timed out")


def _federation(client: TestClient, fid: str) -> dict[str, Any]:
    r = client.get(f"/v1/federations/{fid}", headers=ADMIN)
    assert r.status_code == 200, r.text
    return dict(r.json())


def _current(h: FederationHarness) -> tuple[int | None, str | None]:
    number = _federation(h.client, h.id)["current_round"]
    return number, None if number is None else h.stage(number)


def _play_round(h: FederationHarness, number: int) -> str:
    """The participants act on round ``number`` until it ends; its final stage."""
    for _ in range(8):
        stage = h.stage(number)
        if stage in ENDED:
            return stage
        h.act()
    return h.stage(number)


def _wait_round(h: FederationHarness, number: int) -> None:
    _until(lambda: (_current(h)[0] or 0) >= number)


def auto(**rounds: Any) -> dict[str, Any]:
    return {"schedule": "auto", "warmup_rounds": 0, "lr_global": 1.0, **rounds}


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_autopilot_runs_every_round_and_finishes(client: TestClient, problem: Any) -> None:
    h = FederationHarness(client, rounds=auto(total=3))
    assert h.federation["config"]["rounds"]["schedule"] == "auto"
    assert h.federation["status"] == {"state": "active", "reason": None, "ended_at": None}
    for number in (1, 2, 3):
        _wait_round(h, number)  # nobody called POST .../rounds
        assert _play_round(h, number) == "published"
    fed = _until(lambda: (f := _federation(client, h.id))["status"]["state"] == "finished" and f)
    assert fed["status"]["reason"] == "finished: rounds done"
    assert fed["status"]["ended_at"] is not None
    assert fed["current_round"] == 3
    task = h.sims[0].task()
    assert task["federation"]["state"] == "finished"
    assert task["federation"]["reason"] == "finished: rounds done"
    problem(client.post(f"/v1/federations/{h.id}/rounds", headers=ADMIN), 409, "rounds_exhausted")
    problem(client.post(f"/v1/federations/{h.id}/pause", headers=ADMIN), 409, "federation_ended")


def test_a_manual_federation_waits_for_its_admin_and_still_finishes(client: TestClient) -> None:
    h = FederationHarness(client, rounds={"total": 1, "warmup_rounds": 0})
    assert h.federation["config"]["rounds"]["schedule"] == "manual"
    time.sleep(0.6)  # three ticks
    assert _current(h) == (None, None)
    number = h.start_round()
    assert _play_round(h, number) == "published"
    fed = _until(lambda: (f := _federation(client, h.id))["status"]["state"] == "finished" and f)
    assert fed["status"]["reason"] == "finished: rounds done"


def test_the_privacy_budget_ends_an_autopilot_federation(client: TestClient) -> None:
    z, delta = 2.0, 1e-5
    one, two = (epsilon_for(z, rounds=r, delta=delta) for r in (1, 2))
    h = FederationHarness(
        client,
        rounds=auto(total=5),
        dp={
            "mechanism": "gaussian",
            "noise_multiplier": z,
            "delta": delta,
            "epsilon_budget": (one + two) / 2,  # one round fits, two do not
        },
    )
    _wait_round(h, 1)
    assert _play_round(h, 1) == "published"
    fed = _until(lambda: (f := _federation(client, h.id))["status"]["state"] == "finished" and f)
    assert fed["status"]["reason"] == "finished: privacy budget spent"
    assert fed["current_round"] == 1  # round 2 never started
    assert h.sims[0].task()["federation"]["reason"] == "finished: privacy budget spent"


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_pause_stops_the_autopilot_and_resume_restarts_it(
    client: TestClient, clock: FakeClock, problem: Any
) -> None:
    h = FederationHarness(client, rounds=auto(total=3, min_interval_s=60))
    _wait_round(h, 1)
    assert _play_round(h, 1) == "published"
    time.sleep(1.5)  # ticks and RECHECK_S pass; the fake clock does not: min_interval holds
    assert _current(h) == (1, "published")

    r = client.post(f"/v1/federations/{h.id}/pause", json={"reason": "audit"}, headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["status"] == {
        "state": "paused",
        "reason": "paused by admin: audit",
        "ended_at": None,
    }
    assert client.post(f"/v1/federations/{h.id}/pause", headers=ADMIN).status_code == 200
    clock.advance(61)  # the interval has passed, but the federation is paused
    time.sleep(1.5)
    assert _current(h) == (1, "published")
    assert h.sims[0].task()["federation"]["state"] == "paused"
    problem(client.post(f"/v1/federations/{h.id}/rounds", headers=ADMIN), 409, "federation_paused")

    r = client.post(f"/v1/federations/{h.id}/resume", headers=ADMIN)
    assert r.status_code == 200, r.text
    assert r.json()["status"]["state"] == "active"
    _wait_round(h, 2)
    assert h.sims[0].task()["federation"] == {"state": "active", "reason": None, "ended_at": None}


def test_abort_ends_the_federation_and_its_running_round(client: TestClient, problem: Any) -> None:
    h = FederationHarness(client, rounds=auto(total=3))
    _wait_round(h, 1)
    r = client.post(f"/v1/federations/{h.id}/abort", json={"reason": "wrong data"}, headers=ADMIN)
    assert r.status_code == 200, r.text
    status = r.json()["status"]
    assert (status["state"], status["reason"]) == ("aborted", "aborted by admin: wrong data")
    assert h.stage(1) == "aborted"
    time.sleep(0.6)
    assert _current(h) == (1, "aborted")  # the autopilot starts nothing after an abort
    task = h.sims[2].task()
    assert task["federation"]["state"] == "aborted"
    for path in ("rounds", "pause", "resume", "abort"):
        problem(
            client.post(f"/v1/federations/{h.id}/{path}", headers=ADMIN), 409, "federation_ended"
        )


def test_lifecycle_routes_need_the_admin_token(client: TestClient, problem: Any) -> None:
    h = FederationHarness(client, rounds=auto(total=1))
    for path in ("pause", "resume", "abort"):
        problem(client.post(f"/v1/federations/{h.id}/{path}"), 401, "invalid_token")
    assert _federation(client, h.id)["status"]["state"] == "active"


@pytest.mark.parametrize("backend", ["postgres"])
def test_two_autopilots_at_once_start_exactly_one_round(db_url: str) -> None:
    """Two coordinators' autopilots (own engines) advance the same federation at the same
    moment, many times: each time exactly one starts the next round."""
    with TestClient(_app(db_url)) as client:
        h = FederationHarness(client, rounds={"total": 20, "warmup_rounds": 0})
        fid = h.id
    engines = [make_engine(db_url) for _ in range(2)]
    clock = FakeClock()
    drivers = [RoundDriver(make_sessionmaker(e), clock, Metrics()) for e in engines]
    with make_sessionmaker(engines[0])() as session:  # make it auto without a tick running
        fed = session.get(Federation, fid)
        assert fed is not None
        fed.config = {**fed.config, "rounds": {**fed.config["rounds"], "schedule": "auto"}}
        session.commit()
    try:
        for number in range(1, 6):
            barrier = threading.Barrier(2)
            outcomes: list[str] = []

            def advance(
                driver: RoundDriver, barrier: threading.Barrier, outcomes: list[str]
            ) -> None:
                with driver.sessions() as session:
                    federation = session.get(Federation, fid)
                    assert federation is not None
                    barrier.wait()
                    outcomes.append(autopilot.advance(session, driver, federation, clock()))

            threads = [
                threading.Thread(target=advance, args=(d, barrier, outcomes)) for d in drivers
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(30)
            assert outcomes.count("started") == 1, outcomes
            assert set(outcomes) <= {"started", "round_in_progress", "running"}, outcomes
            with drivers[0].sessions() as session:
                rounds = session.scalar(
                    select(func.count()).select_from(Round).where(Round.federation_id == fid)
                )
                starts = session.scalar(
                    select(func.count())
                    .select_from(RoundEvent)
                    .join(Round, Round.id == RoundEvent.round_id)
                    .where(Round.federation_id == fid, RoundEvent.kind == "started")
                )
                assert (rounds, starts) == (number, number)
                last = session.scalars(
                    select(Round).where(Round.federation_id == fid, Round.number == number)
                ).one()
                last.stage, last.finished_at = "failed", clock()  # end it: the next may start
                session.commit()
    finally:
        for e in engines:
            e.dispose()


def _app(db_url: str) -> Any:
    from secfpp.coordinator.app import create_app
    from tests.support.coordinator import make_settings

    return create_app(make_settings(db_url, tick_interval_s=3600))


def test_the_autopilot_waits_for_the_end_of_round_spread(db_url: str) -> None:
    """A federation larger than ``outcome_rate`` fetches a published round's outcome over
    ``N / outcome_rate`` seconds (coordinator.rounds.views.outcome_after); the autopilot
    starts the next round only after that, or daemons catching up on the outcome would meet
    the next round's share uploads (issue 30's end-of-round burst, moved, not spread)."""
    with TestClient(_app(db_url)) as client:
        h = FederationHarness(client, rounds={"total": 5, "warmup_rounds": 0})
        number = h.run_round()
        assert h.stage(number) == "published"
        fid = h.id
    engine = make_engine(db_url)
    clock = FakeClock()
    try:
        sessions = make_sessionmaker(engine)
        # N = 8 at 2 per second: 4 s (min_interval_s is 0: the spread is all it waits for)
        spread = RoundDriver(sessions, clock, Metrics(), outcome_rate=2.0)
        with sessions() as session:
            fed = session.get(Federation, fid)
            assert fed is not None
            fed.config = {**fed.config, "rounds": {**fed.config["rounds"], "schedule": "auto"}}
            session.commit()
            finished = session.scalars(select(Round.finished_at).where(Round.federation_id == fid))
            (published_at,) = list(finished)
        assert published_at is not None
        clock.now = published_at + timedelta(seconds=3.9)
        with sessions() as session:
            federation = session.get(Federation, fid)
            assert federation is not None
            assert autopilot.advance(session, spread, federation, clock()) == "waiting"
        clock.now = published_at + timedelta(seconds=4.1)
        with sessions() as session:
            federation = session.get(Federation, fid)
            assert federation is not None
            assert autopilot.advance(session, spread, federation, clock()) == "started"
    finally:
        engine.dispose()


def test_the_spread_window_grows_with_the_federation() -> None:
    assert outcome_window(25, 25.0) == 0.0
    assert outcome_window(1000, 25.0) == 40.0
    assert outcome_window(8, 2.0) == 4.0
    assert outcome_window(1024, 0.01) == 600.0  # capped: a task's outcome_after_s stays valid
