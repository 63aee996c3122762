"""Committee rounds with ``rerandomize_distances``: the real app and production engines.

``N = 12`` participants share to a committee of ``c = 7`` (conftest); the round's contributors
(a sample drawn with the round's beacon, :mod:`crypto.contributor_sample`, which every
participant recomputes) also seal their zero-sharing to the 7 members, members add every
named contributor's contribution, and the coordinator's decode still equals the exact
integer reference.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from secfpp.coordinator.rounds.rerandomization import sharing_dropouts
from secfpp.crypto.contributor_sample import round_sample
from secfpp.crypto.rerandomize import ZeroSharing
from secfpp.participant.protocol import contributor_sample
from secfpp.wire.messages import Task
from tests.committee.test_rounds import envelope_rows, exact_point_distances


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_rerandomized_committee_rounds_decode_exactly(
    make_federation: Any, kit: Any, db_url: str
) -> None:
    f = make_federation(rerandomize_distances=True)
    params = f.engines[0].params
    assert f.federation["config"]["crypto"]["rerandomize_distances"] is True
    number = f.start_round()
    announced = f.task(0)["committee"]
    members = announced["members"]
    contributors = f.status(number)["zero_contributors"]
    # the round asks the sample drawn with its beacon (crypto/contributor_sample.py): 5 of
    # the 12 with F = 2 colluders, tolerating D_s = 2 dropouts (the 3 a request must name
    # hold an honest one surely), where the any-subset rule would ask T + 1 + D = 3 + 4 = 7
    sample = round_sample(
        params,
        federation_id=f.federation["id"],
        round_number=number,
        roster=announced["roster"],
        beacon=bytes.fromhex(announced["beacon"]),
    )
    assert sample is not None
    assert contributors == list(sample.members)
    # what each participant recomputes from its own task's announcement to check the request
    for i in range(kit.N):
        own = contributor_sample(Task.model_validate(f.task(i)), params)
        assert own is not None
        assert own.members == sample.members
    assert (sample.plan.size, sample.plan.dropouts, sample.plan.floor) == (5, 2, 3)
    any_subset = params.colluders_among_participants + 1 + sharing_dropouts(params, kit.N)
    assert any_subset == 7
    for i in range(kit.N):  # only the round's contributors are asked for a zero-sharing
        kinds = [s["kind"] for s in f.task(i)["sharing"]["envelopes"]]
        asked = ["prompt", "zero", "zero-seed", "update"] if i in contributors else None
        assert kinds == (asked or ["prompt", "update"])
    seen: dict[str, Any] = {}

    def watch(stage: str, n: int) -> None:
        if stage == "distances" and "distances" not in seen:
            seen["distances"] = f.task(members[0])["distances"]

    f.run_round(number=number, watch=watch)
    status = f.status(number)
    assert status["stage"] == "published", status["failure_reason"]
    assert status["uploads"]["distances"] == members
    assert status["rejected"] == {"distances": [], "aggregation": []}
    assert seen["distances"]["contributors"] == contributors
    rows = envelope_rows(db_url)  # (N + contributors) * c: addressed to members only
    assert len(rows) == (kit.N * 2 + len(contributors)) * kit.C
    # every contributor reaches every member once: as a seed at the committee code's first
    # seeded_points points, as a vector at the others (crypto/rerandomize.py)
    seeded = ZeroSharing(params.clustering_lcc()).seeded_points
    assert 0 < seeded < kit.C
    zero = {(s, r) for s, r, k in rows if k == "zero"}
    seeds = {(s, r) for s, r, k in rows if k == "zero-seed"}
    assert seeds == {(s, r) for s in contributors for r in sorted(members)[:seeded]}
    assert zero == {(s, r) for s in contributors for r in sorted(members)[seeded:]}
    point = np.asarray(status["distances"]["point"])
    np.testing.assert_array_equal(
        point, exact_point_distances(kit, params, number, seen["distances"])
    )
