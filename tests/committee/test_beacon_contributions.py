"""Participants' contributions to the committee beacon (issue 26, item 4; crypto.beacon_mix).

* A coordinator that grinds its own beacon for rounds 3 and 4 (it knows the roster) so
  that each draws a committee of its choice gets neither on main (both hit there): the
  committee is drawn from its value hashed with the contributions revealed afterwards.
* A participant that commits and does not reveal, or reveals a value that does not
  open its commitment, is left out of the combination with its reason (event, task);
  the round still publishes.
* A coordinator that announces a beacon other than the combination, or leaves out a
  contribution whose reveal it acknowledged, is refused (``committee_mismatch``).
* The upload windows and replays of ``POST /me/rounds/{t}/beacon-contribution``.

Everything runs over the real ASGI app on SQLite and PostgreSQL (``db_url``).
"""

from __future__ import annotations

import itertools
from datetime import datetime
from typing import Any

import pytest
from sqlalchemy.orm import Session

from secfpp.coordinator.rounds import beacons
from secfpp.crypto.committee import round_committee

N, C = 12, 7


def _started(f: Any, number: int) -> dict[str, Any]:
    status = f.status(number)
    return dict(next(e for e in status["events"] if e["kind"] == "started")["detail"])


def _ground(federation_id: str, number: int, target: tuple[int, ...]) -> bytes:
    """A beacon whose draw over the full roster is ``target`` (about C(12, 7) = 792 tries)."""
    for counter in itertools.count():
        value = counter.to_bytes(32, "little")
        if round_committee(federation_id, number, list(range(N)), value, C) == target:
            return value
    raise AssertionError("unreachable")


@pytest.mark.slow  # over 7 s in the inner loop (bash dev.sh quick)
def test_a_coordinator_grinding_its_beacon_no_longer_chooses_the_committee(
    make_federation: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    targets = {3: (0, 1, 2, 3, 4, 5, 6), 4: (0, 1, 5, 6, 7, 8, 9)}
    honest_draw = beacons.draw_ahead

    def grinding_draw(session: Session, federation_id: str, number: int, now: datetime) -> bytes:
        if number in targets and beacons.drawn(session, federation_id, number) is None:
            value = _ground(federation_id, number, targets[number])
            session.add(
                beacons.RoundBeacon(
                    federation_id=federation_id, round_number=number, value=value, created_at=now
                )
            )
            return value
        return honest_draw(session, federation_id, number, now)

    monkeypatch.setattr(beacons, "draw_ahead", grinding_draw)
    f = make_federation()
    f.act()  # before round 1: every daemon records round 1's commitment
    hits = 0
    for number in (1, 2, 3, 4):
        assert f.run_round() == number
        status = f.status(number)
        assert status["stage"] == "published", status["failure_reason"]
        if number in targets:
            hits += tuple(status["committee"]) == targets[number]
    assert hits < 2, "the coordinator chose the committees of rounds 3 and 4"
    for number in (3, 4):  # every participant's contribution counted, nobody refused
        detail = _started(f, number)
        assert detail["contributions"] == list(range(N))
        assert detail["contributions_left_out"] == {}


@pytest.mark.slow  # over 7 s in the inner loop (bash dev.sh quick)
def test_non_revealers_are_left_out_with_their_reason(
    federation: Any, kit: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = federation
    f.act()  # before round 1: commitments to round 2's contributions
    assert f.run_round() == 1  # commitments to round 3's; reveals of round 2's
    assert _started(f, 1)["contributions"] == []  # round 1 has none (nothing before it)
    number = f.start_round()
    assert number == 2
    assert _started(f, 2)["contributions"] == list(range(N))
    silent, liar = 5, 6
    # ``silent`` committed in round 1 and never reveals
    monkeypatch.setattr(f.engines[silent].contributions, "_reveal", lambda _t, _k: None)
    r = f.engines[liar].client.http.post(
        "/v1/participants/me/rounds/3/beacon-contribution",
        json={"value": "00" * 32},
        headers={"Authorization": f"Bearer {f.engines[liar].client.token}"},
    )
    kit.problem(r, 422, "reveal_does_not_open")
    assert f.run_round(number=2) == 2
    assert f.run_round() == 3
    status = f.status(3)
    assert status["stage"] == "published", status["failure_reason"]
    assert status["dropped"] == {}
    detail = _started(f, 3)
    assert detail["contributions"] == sorted(set(range(N)) - {silent, liar})
    assert detail["contributions_left_out"] == {
        str(silent): "not_revealed",
        str(liar): "reveal_does_not_open",
    }
    announced = {c["index"]: c for c in f.task(0)["committee"]["contributions"]}
    assert announced[silent]["value"] is None
    assert announced[silent]["reason"] == "not_revealed"
    assert announced[liar]["reason"] == "reveal_does_not_open"
    assert announced[0]["value"] is not None
    assert announced[0]["reason"] is None


def _refusals(f: Any, number: int) -> list[dict[str, Any]]:
    return [e["detail"] for e in f.status(number)["events"] if e["kind"] == "refusal"]


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_a_beacon_that_is_not_the_combination_is_refused(
    federation: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator announces its own pick (the contributions shown, untouched)."""
    from secfpp.coordinator.rounds import contributions

    f = federation
    f.act()
    assert f.run_round() == 1
    honest = contributions.collect

    def own_pick(session: Session, fid: str, number: int, own: bytes) -> Any:
        _combined, parts = honest(session, fid, number, own)
        return _ground(fid, number, (0, 1, 2, 3, 4, 5, 6)), parts

    monkeypatch.setattr(contributions, "collect", own_pick)
    number = f.start_round()
    f.act()
    status = f.status(number)
    assert status["uploads"]["sharing"] == []
    refusals = _refusals(f, number)
    assert {r["reason"] for r in refusals} == {"committee_mismatch"}
    assert all("not the combination" in r["message"] for r in refusals)
    assert status["stage"] == "failed"  # the refusers were dropped: too few remain
    for engine in f.engines.values():
        assert not (engine.state.root / f"rounds/{number}/shares.json").exists()


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_a_contribution_left_out_after_its_reveal_is_refused_by_its_owner(
    federation: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coordinator drops participant 4's acknowledged reveal (recomputing a consistent
    beacon and committee): 4 refuses; the others cannot tell and share."""
    from secfpp.coordinator.rounds import contributions
    from secfpp.crypto.beacon_mix import NOT_REVEALED, Contribution, combine_beacon

    f = federation
    f.act()
    assert f.run_round() == 1
    victim = 4
    honest = contributions.collect

    def drop_victim(session: Session, fid: str, number: int, own: bytes) -> Any:
        _combined, parts = honest(session, fid, number, own)
        parts = [
            Contribution(c.index, c.commitment, None, NOT_REVEALED) if c.index == victim else c
            for c in parts
        ]
        values = {c.index: c.value for c in parts if c.value is not None}
        return combine_beacon(fid, number, own, values), parts

    monkeypatch.setattr(contributions, "collect", drop_victim)
    number = f.start_round()
    f.act()
    refusals = _refusals(f, number)
    assert len(refusals) == 1
    assert refusals[0]["reason"] == "committee_mismatch"
    assert "my revealed contribution is left out" in refusals[0]["message"]
    assert f.status(number)["uploads"]["sharing"] == sorted(set(range(N)) - {victim})


def test_contribution_windows_replays_and_conflicts(federation: Any, kit: Any) -> None:
    f = federation
    client = f.engines[3].client
    http, auth = client.http, {"Authorization": f"Bearer {client.token}"}

    def post(t: int, body: dict[str, Any]) -> Any:
        return http.post(
            f"/v1/participants/me/rounds/{t}/beacon-contribution", json=body, headers=auth
        )

    commitment = "ab" * 32
    kit.problem(post(3, {"commitment": commitment}), 409, "wrong_round")  # too early
    kit.problem(post(1, {"commitment": commitment}), 409, "wrong_round")  # round 1: none
    kit.problem(post(2, {"commitment": commitment, "value": "cd" * 32}), 422, "invalid_request")
    kit.problem(post(2, {}), 422, "invalid_request")
    kit.problem(post(2, {"commitment": "AB" * 32}), 422, "invalid_request")
    kit.problem(post(2, {"value": "cd" * 32}), 409, "wrong_round")  # reveals open in round 1
    r = post(2, {"commitment": commitment})
    assert r.status_code == 200, r.text
    assert r.json() == {"round": 2, "participant_index": 3, "kind": "commitment", "replayed": False}
    assert post(2, {"commitment": commitment}).json()["replayed"] is True
    kit.problem(post(2, {"commitment": "cd" * 32}), 409, "conflicting_upload")
    f.start_round()
    kit.problem(post(2, {"commitment": commitment}), 409, "wrong_round")  # frozen
    kit.problem(post(2, {"value": "cd" * 32}), 422, "reveal_does_not_open")
    kit.problem(post(2, {"value": "cd" * 32}), 409, "conflicting_upload")  # recorded
    other = f.engines[7].client
    r = other.http.post(
        "/v1/participants/me/rounds/2/beacon-contribution",
        json={"value": "cd" * 32},
        headers={"Authorization": f"Bearer {other.token}"},
    )
    kit.problem(r, 409, "not_expected")  # nothing committed to reveal
