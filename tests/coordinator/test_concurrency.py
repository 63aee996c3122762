"""Two coordinator instances on one database never both advance a round.

Both instances (separate apps, engines and connection pools, one shared clock) are
made to drive the same round from several threads at once, at every point where a
transition is due; the event log must show each transition exactly once.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import select

from secfpp.coordinator.db.models import Round
from tests.support.asgi import TestClient


def _race(apps: list[TestClient], round_id: str, threads_per_app: int = 3) -> None:
    drivers = [app.app.state.driver for app in apps]  # type: ignore[attr-defined]
    barrier = threading.Barrier(len(drivers) * threads_per_app)
    errors: list[BaseException] = []

    def work(driver: Any) -> None:
        try:
            barrier.wait()
            driver.drive(round_id)
        except BaseException as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [
        threading.Thread(target=work, args=(d,)) for d in drivers for _ in range(threads_per_app)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def _transitions(apps: list[TestClient]) -> float:
    total = 0.0
    for app in apps:
        metrics = app.app.state.metrics  # type: ignore[attr-defined]
        total += sum(metrics._counters["secfpp_transitions_total"].values())
    return total


def test_two_instances_never_both_advance(
    harness: Any, client: TestClient, second_client: TestClient, clock: Any
) -> None:
    apps = [client, second_client]
    h = harness
    number = h.start_round()
    with client.app.state.sessions() as session:  # type: ignore[attr-defined]
        round_id = session.scalar(select(Round.id).where(Round.number == number))
    # Each stage: all but one upload, then the deadline passes and both instances race.
    for stage, silent in (("sharing", {7}), ("distances", {6, 7}), ("aggregation", {6, 7})):
        assert h.stage(number) == stage
        for sim in h.sims:
            if sim.index not in silent:
                # Alternate instances for the uploads too.
                sim.client = apps[sim.index % 2]
                sim.step()
        clock.advance(61)
        _race(apps, round_id)
    status = h.status(number)
    assert status["stage"] == "published", status
    moves = [
        (e["from_stage"], e["to_stage"]) for e in status["events"] if e["kind"] == "transition"
    ]
    assert moves == [
        ("sharing", "distances"),
        ("distances", "clustering"),
        ("clustering", "aggregation"),
        ("aggregation", "published"),
    ]
    versions = [e["version"] for e in status["events"]]
    assert len(versions) == len(set(versions))
    assert _transitions(apps) == 4
