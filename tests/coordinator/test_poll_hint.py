"""GET /me/task suggests when to poll again (``poll_after_s``): the federation's size /
the coordinator's ``task_poll_rate`` while there is nothing to do, 0 while there is, at
most 60 s; the daemon follows it only when it is longer than its own interval."""

from __future__ import annotations

from typing import Any

import pytest

from secfpp.coordinator.app import create_app
from secfpp.coordinator.rounds.views import MAX_POLL_AFTER_S, poll_after
from secfpp.participant.engine import MAX_POLL_AFTER_S as DAEMON_CAP
from secfpp.participant.engine import poll_interval
from secfpp.wire.messages import Task
from tests.support.asgi import TestClient
from tests.support.coordinator import make_settings


def _task(sim: Any) -> dict[str, Any]:
    r = sim.client.get("/v1/participants/me/task", headers=sim.headers)
    assert r.status_code == 200, r.text
    return dict(r.json())


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_the_hint_follows_the_round_and_the_rate(
    db_url: str, clock: Any, make_harness: Any
) -> None:
    settings = make_settings(db_url, task_poll_rate=2.0)
    with TestClient(create_app(settings, clock=clock)) as client:
        h = make_harness(client)
        n = h.federation["config"]["n_participants"]
        before = _task(h.sims[0])
        assert before["action"] == "wait"
        assert before["poll_after_s"] == n / 2.0
        number = h.start_round()
        first = _task(h.sims[0])
        assert first["action"] == "share"
        assert first["poll_after_s"] == 0.0
        assert h.sims[0].share(first).status_code == 200
        after = _task(h.sims[0])
        assert after["action"] == "wait"
        assert after["uploaded"]
        assert after["poll_after_s"] == n / 2.0
        for _ in range(6):
            if h.stage(number) == "published":
                break
            h.act()
        done = _task(h.sims[0])
        assert done["round"] == number
        assert done["action"] == "fetch_outcome"
        assert done["poll_after_s"] == n / 2.0  # the daemon fetches at once, then waits


def test_the_hint_is_capped(db_url: str, clock: Any, make_harness: Any) -> None:
    with TestClient(create_app(make_settings(db_url, task_poll_rate=0.001), clock=clock)) as c:
        h = make_harness(c)  # stage deadlines of 60 s: a tenth of them, under the 60 s cap
        assert h.federation["config"]["deadlines"]["distances_s"] == 60
        assert _task(h.sims[0])["poll_after_s"] == 6.0
    assert MAX_POLL_AFTER_S == 60.0


def _doc(action: str, uploaded: bool) -> Task:
    return Task.model_validate(
        {
            "federation_id": "f",
            "participant_index": 0,
            "round": 1,
            "stage": "sharing",
            "action": action,
            "deadline": None,
            "uploaded": uploaded,
            "cluster": None,
            "global_prompt": None,
            "senders": None,
            "peers": [],
        }
    )


@pytest.mark.parametrize(
    ("action", "uploaded", "participants", "expected"),
    [
        ("wait", False, 1000, 10.0),
        ("wait", True, 1000, 10.0),
        ("wait", True, 7, 0.07),
        ("dropped", False, 50, 0.5),
        ("share", False, 1000, 0.0),  # work to do now
        ("compute_distances", False, 1000, 0.0),
        ("compute_sums", False, 1000, 0.0),
        ("compute_sums", True, 1000, 10.0),  # done: wait like the rest
        ("fetch_outcome", False, 1000, 10.0),  # fetched at once; then wait
        ("wait", True, 100_000, 60.0),
        ("wait", True, 0, 0.01),
    ],
)
def test_poll_after(action: str, uploaded: bool, participants: int, expected: float) -> None:
    assert poll_after(_doc(action, uploaded), participants, 100.0) == expected


def test_the_hint_stays_well_inside_the_shortest_deadline() -> None:
    wait = _doc("wait", True)
    assert poll_after(wait, 1000, 100.0, shortest_deadline_s=30.0) == 3.0
    assert poll_after(wait, 1000, 100.0, shortest_deadline_s=600.0) == 10.0
    assert poll_after(wait, 100_000, 100.0, shortest_deadline_s=3600.0) == 60.0
    assert poll_after(_doc("share", False), 1000, 100.0, shortest_deadline_s=30.0) == 0.0


@pytest.mark.parametrize("hint", [None, "10", True, float("nan"), float("inf"), -5.0, 0.0, 0.5])
def test_the_daemon_keeps_its_interval_without_a_longer_valid_hint(hint: object) -> None:
    assert poll_interval(hint, 1.0) == 1.0  # type: ignore[arg-type]


def test_the_daemon_follows_a_longer_hint_with_a_spread_and_a_cap() -> None:
    waits = [poll_interval(10, 1.0) for _ in range(400)]
    assert all(9.0 <= w <= 11.0 for w in waits)
    assert max(waits) - min(waits) > 1.0  # spread, not one value
    assert all(poll_interval(10_000.0, 1.0) == DAEMON_CAP for _ in range(50))
    assert poll_interval(10.0, 30.0) == 30.0
