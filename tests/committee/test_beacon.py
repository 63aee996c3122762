"""Committee beacons are drawn one round ahead and committed to (docs/protocol.md §11).

* Before round ``r`` exists every task carries the commitment to its beacon
  (``next_beacon``); the round then reveals a beacon that opens it, and announces the
  next round's commitment; the ``started`` event records that the beacon was committed.
* A coordinator that draws another beacon once the commitment is out (to grind the
  committee) is refused by every daemon that recorded it: nothing is shared.
* A daemon keeps the first commitment it saw for a round.
* A federation without a beacon drawn ahead (created before this mechanism) draws it at
  the round's start, records ``beacon_committed: false``, and commits to the next one.
"""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError
from sqlalchemy import delete, update

from secfpp.coordinator.db.engine import make_engine
from secfpp.coordinator.db.models import RoundBeacon
from secfpp.crypto.committee import beacon_commitment
from tests.support.wire import task_of


def _opens(federation_id: str, number: int, beacon_hex: str, commitment_hex: str) -> bool:
    return beacon_commitment(federation_id, number, bytes.fromhex(beacon_hex)).hex() == (
        commitment_hex
    )


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_each_beacon_is_committed_before_its_round_and_opens_the_commitment(
    federation: Any, kit: Any
) -> None:
    f = federation
    before = f.task(0)
    assert before["round"] is None
    first = before["next_beacon"]
    assert first["round"] == 1
    assert len(bytes.fromhex(first["commitment"])) == 32
    f.act()  # every daemon polls once before the round and records the commitment
    number = f.run_round()
    assert number == 1
    status = f.status(1)
    started = next(e for e in status["events"] if e["kind"] == "started")
    assert started["detail"]["beacon_committed"] is True
    beacon = started["detail"]["coordinator_beacon"]
    assert _opens(f.id, 1, beacon, first["commitment"])
    assert status["stage"] == "published"
    during = f.task(0)
    assert during["next_beacon"]["round"] == 2
    second = during["next_beacon"]["commitment"]
    assert second == started["detail"]["next_commitment"]
    assert f.run_round() == 2
    task = f.task(3)
    assert task["committee"]["coordinator_beacon"] != beacon  # a fresh beacon each round
    assert _opens(f.id, 2, task["committee"]["coordinator_beacon"], second)
    for engine in f.engines.values():  # recorded by every daemon, first commitment kept
        assert engine._commitment(1) == bytes.fromhex(first["commitment"])
        assert engine._commitment(2) == bytes.fromhex(second)


def test_a_beacon_redrawn_after_its_commitment_is_refused(
    federation: Any, kit: Any, db_url: str
) -> None:
    f = federation
    f.act()  # the daemons record round 1's commitment
    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:  # the coordinator changes round 1's beacon
            conn.execute(
                update(RoundBeacon)
                .where(RoundBeacon.federation_id == f.id, RoundBeacon.round_number == 1)
                .values(value=bytes(range(32)))
            )
    finally:
        engine.dispose()
    number = f.start_round()
    f.act()
    status = f.status(number)
    assert status["uploads"]["sharing"] == []
    refusals = [e for e in status["events"] if e["kind"] == "refusal"]
    assert refusals
    assert {e["detail"]["reason"] for e in refusals} == {"committee_mismatch"}
    assert all("does not open the commitment" in e["detail"]["message"] for e in refusals)
    assert status["stage"] == "failed"
    for e in f.engines.values():
        assert not (e.state.root / f"rounds/{number}/shares.json").exists()


def test_a_daemon_keeps_the_first_commitment_and_ignores_malformed_ones(
    federation: Any, kit: Any
) -> None:
    engine = federation.engines[2]
    first, other = "11" * 32, "22" * 32
    engine._record_beacon(task_of({"round": 6, "next_beacon": {"round": 7, "commitment": first}}))
    engine._record_beacon(task_of({"round": 6, "next_beacon": {"round": 7, "commitment": other}}))
    for bad in (
        {"round": 7, "commitment": "ab"},
        {"round": 7, "commitment": "zz" * 32},
        {"round": 8, "commitment": other},  # not the round after the task's
        {"round": 10**9, "commitment": other},  # would push the recorded ones out
    ):
        engine._record_beacon(task_of({"round": 6, "next_beacon": bad}))
    for wrong_shape in ({"round": "x", "commitment": first}, {"round": 7}):
        # The client refuses such an answer (InvalidAnswerError) before the engine sees it.
        with pytest.raises(ValidationError, match=r"next_beacon\.(round|commitment)"):
            task_of({"round": 6, "next_beacon": wrong_shape})
    engine._record_beacon(
        task_of({"round": None, "next_beacon": {"round": 2, "commitment": other}})
    )
    engine._beacon_log = None  # read back from the state directory
    assert engine._commitment(7) == bytes.fromhex(first)
    assert engine._commitment(8) is None
    assert engine._commitment(2) is None
    assert engine._commitment(10**9) is None


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_a_federation_without_a_drawn_beacon_draws_it_at_the_start(
    federation: Any, kit: Any, db_url: str
) -> None:
    """A federation created before beacons were drawn ahead (no row): the round draws its
    beacon when it starts, says so, and still commits to the next one."""
    f = federation
    engine = make_engine(db_url)
    try:
        with engine.begin() as conn:
            conn.execute(delete(RoundBeacon).where(RoundBeacon.federation_id == f.id))
    finally:
        engine.dispose()
    assert f.task(0)["next_beacon"] is None
    number = f.run_round()
    status = f.status(number)
    assert status["stage"] == "published"
    started = next(e for e in status["events"] if e["kind"] == "started")
    assert started["detail"]["beacon_committed"] is False
    assert f.task(0)["next_beacon"]["commitment"] == started["detail"]["next_commitment"]
    assert f.run_round() == 2
    second = next(e for e in f.status(2)["events"] if e["kind"] == "started")
    assert second["detail"]["beacon_committed"] is True
