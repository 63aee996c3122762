"""The round driver: deadline grace after an outage, single-flight passes, one session."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfpp.coordinator.app import create_app
from secfpp.coordinator.rounds.driver import RoundDriver, effective_deadline
from secfpp.coordinator.settings import Settings
from tests.support.asgi import TestClient

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@given(st.integers(-600, 600), st.integers(-600, 600), st.floats(0, 300))
def test_only_deadlines_passed_before_the_restart_move(
    deadline_s: int, resumed_s: int, grace_s: float
) -> None:
    deadline = T0 + timedelta(seconds=deadline_s)
    resumed = T0 + timedelta(seconds=resumed_s)
    got = effective_deadline(deadline, resumed, grace_s)
    if deadline > resumed:
        assert got == deadline
    else:
        assert got == max(deadline, resumed + timedelta(seconds=grace_s))
    assert got >= deadline


def _settings(db_url: str, **overrides: Any) -> Settings:
    values = {"database_url": db_url, "admin_token": "admin-secret-token", "tick_interval_s": 60}
    return Settings(**(values | overrides))


def test_a_restart_after_the_deadline_gives_the_stage_its_grace(
    db_url: str, clock: Any, make_harness: Any
) -> None:
    with TestClient(create_app(_settings(db_url), clock=clock)) as first:
        h = make_harness(first)  # deadlines 60 s
        number = h.start_round()
        h.act(skip={7})  # participant 7 has not shared when the coordinator goes down
    clock.advance(300)  # down for five minutes: the sharing deadline passed meanwhile
    with TestClient(create_app(_settings(db_url, deadline_grace_s=30), clock=clock)) as second:
        h.client = second
        for sim in h.sims:
            sim.client = second
        assert h.stage(number) == "sharing"
        clock.advance(29)
        assert h.stage(number) == "sharing"
        h.sims[7].step()  # within the grace period: its shares count
        status = h.status(number)
        assert status["stage"] == "distances"
        assert status["dropped"] == {}


def test_after_the_grace_period_missing_uploads_are_dropouts(
    db_url: str, clock: Any, make_harness: Any
) -> None:
    with TestClient(create_app(_settings(db_url), clock=clock)) as first:
        h = make_harness(first)
        number = h.start_round()
        h.act(skip={7})
    clock.advance(300)
    with TestClient(create_app(_settings(db_url, deadline_grace_s=30), clock=clock)) as second:
        h.client = second
        for sim in h.sims:
            sim.client = second
        clock.advance(31)
        status = h.status(number)
        assert status["stage"] == "distances"
        assert status["dropped"] == {"7": "sharing"}


def test_a_database_reconnect_restarts_the_grace(clock: Any) -> None:
    driver = RoundDriver(sessions=None, clock=clock, metrics=None, grace_s=10)  # type: ignore[arg-type]
    started = driver.resumed_at
    clock.advance(100)
    driver._database_answered()  # no outage: nothing changes
    assert driver.resumed_at == started
    driver.note_outage()
    clock.advance(50)
    driver._database_answered()
    assert driver.resumed_at == started + timedelta(seconds=150)
    assert driver._outage  # the episode ends after OUTAGE_SETTLE_S of answers
    clock.advance(RoundDriver.OUTAGE_SETTLE_S)
    driver._database_answered()
    assert driver.resumed_at == started + timedelta(seconds=150)
    assert not driver._outage


def test_a_flapping_database_gives_one_pair_of_warnings(
    clock: Any, caplog: pytest.LogCaptureFixture
) -> None:
    """Answers and failures that alternate faster than OUTAGE_SETTLE_S are one outage:
    one "unavailable" and one "reachable again" warning (before: one pair per flap), and
    the grace runs from the first answer after the last failure."""
    driver = RoundDriver(sessions=None, clock=clock, metrics=None, grace_s=60)  # type: ignore[arg-type]
    start = driver.resumed_at
    with caplog.at_level("WARNING", logger="secfpp.coordinator.rounds.driver"):
        driver.note_outage()
        for _ in range(20):  # a 5-minute outage in which the database answers now and then
            clock.advance(7)
            driver._database_answered()
            clock.advance(1)
            driver._database_answered()
            clock.advance(7)
            driver.note_outage()
        clock.advance(2)
        driver._database_answered()  # the database is back for good
        back = clock()
        for _ in range(10):
            clock.advance(1)
            driver._database_answered()
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 2, warnings
    assert warnings[0].startswith("database unavailable")
    assert warnings[1].startswith("database reachable again (unavailable for 302 s)")
    assert driver.resumed_at == back
    assert driver.resumed_at - start == timedelta(seconds=302)
    assert not driver._outage
    caplog.clear()
    with caplog.at_level("WARNING", logger="secfpp.coordinator.rounds.driver"):
        clock.advance(100)
        driver.note_outage()  # a new outage after a settled recovery is a new episode
    assert next(r.getMessage() for r in caplog.records).startswith("database unavailable")


def test_passes_over_one_round_are_single_flight(
    db_url: str, clock: Any, make_harness: Any
) -> None:
    with TestClient(create_app(_settings(db_url), clock=clock)) as client:
        driver: RoundDriver = client.app.state.driver  # type: ignore[attr-defined]
        round_id = _round_id(client, make_harness(client).start_round())
        calls: list[float] = []
        real = driver._drive

        def slow(session: Any, rid: str, max_steps: Any) -> None:
            calls.append(time.monotonic())
            time.sleep(0.3)
            real(session, rid, max_steps)

        driver._drive = slow  # type: ignore[method-assign]
        barrier = threading.Barrier(8)

        def drive() -> None:
            barrier.wait()
            driver.drive(round_id)

        threads = [threading.Thread(target=drive) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        # One pass runs; whoever arrived during it waits for at most one more pass, which
        # sees everything they could have: one or two passes, not eight.
        assert 1 <= len(calls) <= 2
        assert driver.drive(round_id, wait_s=0.0) is True  # the lock is free: a new pass
        assert len(calls) <= 3


def _round_id(client: TestClient, number: int) -> str:
    from sqlalchemy import select

    from secfpp.coordinator.db.models import Round

    with client.app.state.sessions() as session:  # type: ignore[attr-defined]
        return str(session.scalar(select(Round.id).where(Round.number == number)))
