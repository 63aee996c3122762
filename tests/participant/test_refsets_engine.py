"""Daemons refuse a regrouping the membership-change rule forbids (real app, real engines)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import create_engine, select

from secfpp.coordinator.db.models import Round
from tests.participant.test_engine import ADMIN, drive, http, make_engines
from tests.support.asgi import TestClient

__all__ = ["http"]  # the fixture, used by name below


def _regroup_next_round(db: Path, fid: str, number: int, clusters: list[list[int]]) -> None:
    """A dishonest coordinator: the membership round ``number + 1`` will use is rewritten
    (what its clustering step would have produced had it moved members at will)."""
    engine = create_engine(f"sqlite:///{db}")
    try:
        with engine.begin() as conn:
            row = conn.execute(
                select(Round.id, Round.state).where(
                    Round.federation_id == fid, Round.number == number
                )
            ).one()
            state = row.state if isinstance(row.state, dict) else json.loads(row.state)
            state["next_membership"] = {
                "clusters": [[c, members] for c, members in enumerate(clusters)],
                "probes": [],
                "next_id": len(clusters),
            }
            conn.execute(Round.__table__.update().where(Round.id == row.id).values(state=state))
    finally:
        engine.dispose()


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_daemons_refuse_a_membership_change_beyond_one_split_or_merge(
    http: TestClient, tmp_path: Path
) -> None:
    fid, engines = make_engines(http, tmp_path)
    first = drive(http, fid, engines)
    status = http.get(f"/v1/federations/{fid}/rounds/{first}", headers=ADMIN).json()
    assert status["stage"] == "published", status["failure_reason"]
    second = drive(http, fid, engines)
    status = http.get(f"/v1/federations/{fid}/rounds/{second}", headers=ADMIN).json()
    assert status["stage"] == "published", status["failure_reason"]
    clusters = sorted(sorted(c["members"]) for c in status["next_clusters"])
    assert clusters == [[0, 1, 2, 3], [4, 5, 6, 7]]
    # members 3 and 4 swap clusters: not one split, not one merge
    _regroup_next_round(tmp_path / "coordinator.db", fid, second, [[0, 1, 2, 4], [3, 5, 6, 7]])
    third = drive(http, fid, engines)
    status = http.get(f"/v1/federations/{fid}/rounds/{third}", headers=ADMIN).json()
    assert status["stage"] == "failed"
    refusers = []
    for engine in engines:
        progress = engine.progress(third)
        assert "distances_digest" not in progress  # nobody computed anything
        assert not (engine.state.root / f"rounds/{third}/distances.bin").exists()
        refusal = progress.get("distances_refusal")
        if refusal is not None:  # the round may fail before the last daemons ask
            assert refusal["reason"] == "membership_change"
            assert refusal["sent"] is True
            refusers.append(engine.index)
    assert len(refusers) >= 2, refusers
    refused = [e for e in status["events"] if e["kind"] == "refusal"]
    assert {e["detail"]["reason"] for e in refused} == {"membership_change"}
    # the sets each daemon answered in round 2 are what it compared with
    assert engines[0].progress(second)["distances_sets"]["round"] == second
