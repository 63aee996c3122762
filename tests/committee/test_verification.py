"""Participants verify the committee; the settings are validated.

* A coordinator that announces a committee other than the public draw of the announced
  roster and beacon gets no share from anybody: every production engine refuses
  (``committee_mismatch``) before it trains or seals anything.
* Every other way an announcement can be wrong is refused by the same check
  (:func:`participant.protocol.round_committee`), one case at a time.
* ``tolerance.committee_size`` is validated at federation creation (422 naming it).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest
from sqlalchemy import func, select

from secfpp.coordinator.db.engine import make_engine
from secfpp.coordinator.db.models import ShareEnvelope
from secfpp.coordinator.rounds import service
from secfpp.crypto.committee import (
    CommitteeMismatchError,
    committee_size,
    committee_threshold,
    draw_committee,
    round_committee,
)
from secfpp.crypto.params import CryptoParams
from secfpp.participant.protocol import round_committee as check_task
from secfpp.wire.messages import Task


def _envelopes(db_url: str) -> int:
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(select(func.count()).select_from(ShareEnvelope)).scalar_one())
    finally:
        engine.dispose()


def test_a_committee_that_is_not_the_draw_is_refused_and_nothing_is_shared(
    federation: Any, kit: Any, db_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = federation

    def lying_draw(fid: str, number: int, roster: list[int], beacon: bytes, size: int) -> Any:
        honest = round_committee(fid, number, roster, beacon, size)
        outsider = next(i for i in roster if i not in honest)
        return tuple(sorted((*honest[1:], outsider)))  # one member swapped for an outsider

    monkeypatch.setattr(service, "round_committee", lying_draw)
    number = f.start_round()
    f.act()
    status = f.status(number)
    assert _envelopes(db_url) == 0
    assert status["uploads"]["sharing"] == []
    refusals = [e for e in status["events"] if e["kind"] == "refusal"]
    refusers = sorted(e["detail"]["participant"] for e in refusals)
    assert {e["detail"]["reason"] for e in refusals} == {"committee_mismatch"}
    assert "is not the public draw" in refusals[0]["detail"]["message"]
    # Participants act in index order; each refusal drops the refuser, and once fewer
    # committee members remain than the codes need the round fails at once.
    assert status["stage"] == "failed"
    assert "committee members remain" in status["failure_reason"]
    assert refusers == list(range(len(refusers)))
    assert len(refusers) >= 1
    for index, engine in f.engines.items():
        progress = engine.progress(number)
        assert not progress.get("trained")  # refused (or saw the failure) before training
        assert not (engine.state.root / f"rounds/{number}/shares.json").exists()
        if index in refusers:
            assert progress["sharing_refusal"]["reason"] == "committee_mismatch"
            assert progress["sharing_refusal"]["sent"]
        else:
            assert progress["outcome_stage"] == "failed"


def test_an_honest_announcement_passes_the_check(federation: Any, kit: Any) -> None:
    f = federation
    f.start_round()
    task = f.task(4)
    members = check_task(
        Task.model_validate(task), params=f.engines[4].params, federation_id=f.id, index=4
    )
    assert members is not None
    assert list(members) == task["committee"]["members"]


def _other_beacon(federation_id: str, task: dict[str, Any]) -> str:
    """A beacon whose public draw is not the announced committee. A fixed beacon would draw
    the same 7 of 12 by chance once in C(12, 7) = 792 federations (ids are random), and the
    daemon would then refuse the beacon's combination first, not the draw."""
    c = task["committee"]
    for k in range(256):
        beacon = bytes([k]) * 32
        drawn = draw_committee(federation_id, task["round"], c["roster"], beacon, c["size"])
        if list(drawn) != sorted(c["members"]):
            return beacon.hex()
    raise AssertionError("every candidate beacon draws the announced committee")


def _tampered(federation_id: str, task: dict[str, Any], how: str) -> dict[str, Any]:
    out = copy.deepcopy(task)
    c = out["committee"]
    if how == "beacon":
        c["beacon"] = _other_beacon(federation_id, task)
    elif how == "short_beacon":
        c["beacon"] = c["beacon"][:30]
    elif how == "size":
        c["size"] = c["size"] - 1
        c["members"] = c["members"][:-1]
    elif how == "roster_without_me":
        c["roster"] = [i for i in c["roster"] if i != out["participant_index"]]
    elif how == "roster_stranger":
        c["roster"] = [*c["roster"], 99]
    elif how == "roster_unsorted":
        c["roster"] = list(reversed(c["roster"]))
    elif how == "recipients":
        out["sharing"]["recipients"] = out["sharing"]["recipients"][:-1]
    elif how == "missing":
        out["committee"] = None
    elif how == "malformed":
        c["beacon"] = "not hex"
    elif how == "coordinator_beacon":  # the committee drawn from a beacon not combined
        c["coordinator_beacon"] = bytes(32).hex()
    elif how == "contribution_not_hex":
        # (A missing ``contributions`` member is the schema's default, an empty list: in
        # this first round, where nobody has contributed yet, that is the honest value.)
        c["contributions"] = [{"index": 0, "commitment": "zz", "value": None, "reason": None}]
    else:
        raise AssertionError(how)
    return out


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("beacon", "is not the public draw"),
        ("short_beacon", "fewer than 16"),
        ("size", "committee size of 6, the federation's is 7"),
        ("roster_without_me", "is not on the roster"),
        ("roster_stranger", "not enrolled"),
        ("roster_unsorted", "not sorted"),
        ("recipients", "not the committee"),
        ("missing", "announces none"),
        ("malformed", "malformed"),
        ("coordinator_beacon", "not the combination"),
        ("contribution_not_hex", "malformed"),
    ],
)
def test_every_wrong_announcement_is_refused(
    federation: Any, kit: Any, how: str, message: str
) -> None:
    f = federation
    f.start_round()
    index = 5
    task = f.task(index)
    with pytest.raises(CommitteeMismatchError, match=message) as info:
        check_task(
            Task.model_validate(_tampered(f.id, task, how)),
            params=f.engines[index].params,
            federation_id=f.id,
            index=index,
        )
    assert info.value.reason == "committee_mismatch"


def test_a_committee_in_an_all_to_all_federation_is_refused(federation: Any) -> None:
    f = federation
    f.start_round()
    task = f.task(0)
    all_to_all = CryptoParams.for_federation(12, reduced_dim=8, collusion_fraction=0.2)
    with pytest.raises(CommitteeMismatchError, match="shares all-to-all"):
        check_task(Task.model_validate(task), params=all_to_all, federation_id=f.id, index=0)


# -- settings ------------------------------------------------------------------------
def test_committee_size_settings_are_validated(
    client: Any, kit: Any, make_federation: Callable[..., Any]
) -> None:
    def create(**tolerance: Any) -> Any:
        return client.post(
            "/v1/federations", json=kit.federation_body(**tolerance), headers=kit.ADMIN
        )

    too_big = kit.problem(create(committee_size=13), 422, "invalid_parameter")
    assert too_big["parameter"] == "tolerance.committee_size"
    assert "exceeds n_participants = 12" in too_big["detail"]
    unsafe = kit.problem(
        create(committee_size=7, collusion_fraction=0.25), 422, "invalid_parameter"
    )
    assert unsafe["parameter"] == "tolerance.committee_size"
    assert "smallest safe size is 12" in unsafe["detail"]
    kit.problem(create(committee_size=2), 422, "invalid_request")  # below the code minimum
    everybody = create(committee_size=12)
    assert everybody.status_code == 201, everybody.text
    assert everybody.json()["config"]["crypto"]["committee_size"] is None  # all-to-all
    default = create(committee_size=None)
    assert default.json()["config"]["crypto"]["committee_size"] is None  # N <= 128
    large = client.post(
        "/v1/federations",
        json={**kit.federation_body(committee_size=None), "n_participants": 200},
        headers=kit.ADMIN,
    )
    assert large.status_code == 201, large.text
    crypto = large.json()["config"]["crypto"]
    auto = committee_size(200, collusion_fraction=0.2, dropout_fraction=0.25)
    assert 64 <= auto < 200
    assert crypto["committee_size"] == auto  # automatic: the smallest safe size from 64
    t, dropouts = committee_threshold(auto, 0.25)
    assert crypto["aggregation_code"]["t"] == crypto["clustering_code"]["t"] == t
    assert crypto["aggregation_code"]["k"] == auto - dropouts - t
    smallest = create(committee_size=3, collusion_fraction=0.05)
    assert smallest.status_code == 201, smallest.text
    assert smallest.json()["config"]["crypto"]["committee_size"] == 3
