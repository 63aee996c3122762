"""participant.contributions: the value is on disk before its commitment leaves, a crash
between the two re-sends the same commitment, and only acknowledged uploads count."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import cast

import pytest

from secfpp.crypto.beacon_mix import contribution_commitment
from secfpp.crypto.rng import DeterministicRandom
from secfpp.participant.client import CoordinatorClient, RequestRefusedError
from secfpp.participant.contributions import ContributionLog
from secfpp.participant.state import StateDir
from tests.support.wire import task_of

FID = "fed-x"


class FakeClient:
    def __init__(self) -> None:
        self.sent: list[tuple[int, dict[str, str]]] = []
        self.fail: Exception | None = None

    def beacon_contribution(self, round_number: int, body: dict[str, str]) -> None:
        if self.fail is not None:
            raise self.fail
        self.sent.append((round_number, dict(body)))


C3 = "33" * 32
"""The coordinator's commitment to round 3's beacon (not what these tests look at)."""


def _log(tmp_path: Path, client: FakeClient) -> ContributionLog:
    return ContributionLog(
        cast(CoordinatorClient, client),
        StateDir(tmp_path),
        DeterministicRandom("c"),
        federation_id=FID,
        index=4,
        last_round=None,
    )


def test_commit_then_reveal_and_a_crash_in_between(tmp_path: Path) -> None:
    client = FakeClient()
    client.fail = ConnectionError("coordinator unreachable")
    log = _log(tmp_path, client)
    with pytest.raises(ConnectionError):
        log.on_task(task_of({"round": 1}))  # commit for round 3 fails after the value was saved
    saved = StateDir(tmp_path).read_object(StateDir.CONTRIBUTIONS)
    value = bytes.fromhex(saved["3"]["value"])
    assert saved["3"]["committed"] is False
    assert stat.S_IMODE((tmp_path / StateDir.CONTRIBUTIONS).stat().st_mode) == 0o600
    client.fail = None
    log = _log(tmp_path, client)  # a restarted daemon
    log.on_task(task_of({"round": 1}))
    commitment = contribution_commitment(FID, 3, 4, value).hex()
    assert client.sent == [(3, {"commitment": commitment})]  # the same value, committed
    assert log.evidence(3).mine == value
    assert not log.evidence(3).revealed
    digest = "11" * 32
    log.on_task(
        task_of(
            {"round": 2, "next_beacon": {"round": 3, "commitment": C3, "contributions": digest}}
        )
    )
    assert client.sent[-2:] == [
        (4, {"commitment": client.sent[-2][1]["commitment"]}),
        (3, {"value": value.hex()}),
    ]
    evidence = log.evidence(3)
    assert evidence.revealed
    assert evidence.digest == bytes.fromhex(digest)
    log.on_task(
        task_of(
            {"round": 2, "next_beacon": {"round": 3, "commitment": C3, "contributions": "22" * 32}}
        )
    )
    assert log.evidence(3).digest == bytes.fromhex(digest)  # the first digest is kept
    assert len(client.sent) == 3  # nothing sent twice once acknowledged


def test_a_refused_commitment_is_not_claimed(tmp_path: Path) -> None:
    client = FakeClient()
    client.fail = RequestRefusedError(409, "wrong_round", "closed", "POST", "/x")
    log = _log(tmp_path, client)
    log.on_task(task_of({"round": 5}))
    assert log.evidence(7).mine is None  # not acknowledged: the check does not demand it
    client.fail = None
    log.on_task(task_of({"round": 6}))
    assert all(body.get("value") is None for t, body in client.sent if t == 7)
