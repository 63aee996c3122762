"""A full SecFPP round through the real ASGI app, N = 8 participants, on every backend."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from secfpp.crypto.clustering import Membership
from secfpp.crypto.quantize import dequantize, quantize
from secfpp.crypto.refset_rules import probe_salt
from secfpp.crypto.secpc import plaintext_distances


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_three_rounds_find_two_groups_and_aggregate_per_cluster(
    harness: Any,
) -> None:
    h = harness
    gen0 = h.client.get("/v1/participants/me/task", headers=h.sims[0].headers).json()
    assert gen0["action"] == "wait"
    assert gen0["round"] is None

    # Round 1: one cluster and its probe; the distances decode to the plaintext ones, and
    # the probe's axis already parts the two groups.
    r1 = h.run_round()
    status = h.status(r1)
    assert status["stage"] == "published", status
    assert status["present"] == list(range(8))
    assert [c["members"] for c in status["clusters"]] == [list(range(8))]
    config = h.sims[0].config
    assert config is not None
    spec = config.crypto_params().clustering_field
    quantized = {
        i: dequantize(
            quantize(h.group_vector(i), spec.field, bits=spec.bits, clip=spec.clip),
            spec.field,
            bits=spec.bits,
        )
        for i in range(8)
    }
    beacon = bytes.fromhex(h.sims[0].distance_tasks[r1]["distances"]["beacon"])
    refs = Membership.initial(range(8)).reference_sets(
        range(8),
        min_aggregation_size=config.crypto.min_aggregation_size,
        min_reference_size=config.crypto.min_reference_size,
        salt=probe_salt(h.id, r1, beacon),
    )
    assert refs is not None
    assert len(refs.probes) == 1
    assert 3 <= len(refs.probes[0][1]) <= 5
    expected = plaintext_distances(quantized, refs)
    np.testing.assert_allclose(status["distances"]["point"], expected.point, rtol=1e-9, atol=1e-9)
    kinds = [e["kind"] for e in status["events"]]
    assert kinds[0] == "started"
    assert kinds.count("transition") == 4
    assert [e["to_stage"] for e in status["events"][1:]] == [
        "distances",
        "clustering",
        "aggregation",
        "published",
    ]

    groups = sorted(sorted(c["members"]) for c in status["next_clusters"])
    assert groups == [[0, 1, 2, 3], [4, 5, 6, 7]]

    # Round 2: two clusters, too small to probe; membership stays.
    r2 = h.run_round()
    status = h.status(r2)
    assert status["stage"] == "published", status
    assert np.asarray(status["distances"]["point"]).shape == (8, 2)
    groups = sorted(sorted(c["members"]) for c in status["next_clusters"])
    assert groups == [[0, 1, 2, 3], [4, 5, 6, 7]]
    before = h.prompts(r2)
    assert len(before) == 2

    # Round 3: each cluster's prompt moves by the mean of its members' updates.
    r3 = h.run_round()
    status = h.status(r3)
    assert status["stage"] == "published", status
    assert sorted(len(c["members"]) for c in status["clusters"]) == [4, 4]
    after = h.prompts(r3)
    for cluster in status["clusters"]:
        c, members = cluster["cluster"], cluster["members"]
        plaintext = np.mean([h.sims[i].updates[r3] for i in members], axis=0)
        bits = config.crypto.aggregation_field.bits
        np.testing.assert_allclose(after[c] - before[c], plaintext, atol=2.0**-bits + 1e-12)
    outcome = h.client.get(
        f"/v1/participants/me/rounds/{r3}/outcome", headers=h.sims[5].headers
    ).json()
    assert outcome["cluster"] == next(
        c["cluster"] for c in status["next_clusters"] if 5 in c["members"]
    )
