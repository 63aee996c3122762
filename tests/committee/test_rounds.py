"""Committee rounds through the real app and the production participant engine.

``N = 12`` participants share to a committee of ``c = 7`` drawn per round (conftest):
the coordinator publishes roster, beacon and committee; every engine checks the draw,
seals shares to the 7 members only; only members open inboxes and upload coded results;
the coordinator decodes from them. Every decoded value is compared with an exact integer
reference computed from the participants' own vectors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from sqlalchemy import select

from secfpp.coordinator.db.engine import make_engine
from secfpp.coordinator.db.models import Attestation, ShareEnvelope
from secfpp.crypto.committee import round_committee
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.quantize import lift, quantize
from secfpp.crypto.wire import pack_field_vector, unpack_field_vector
from secfpp.participant.client import RequestRefusedError


# -- exact references --------------------------------------------------------------------
def quantized_prompts(
    kit: Any, params: CryptoParams, number: int, who: Sequence[int]
) -> dict[int, Any]:
    spec = params.clustering_field
    return {
        i: lift(
            quantize(kit.reduced_vector(i, number), spec.field, bits=spec.bits, clip=spec.clip),
            spec.field,
        ).astype(object)
        for i in who
    }


def exact_point_distances(
    kit: Any, params: CryptoParams, number: int, request: dict[str, Any]
) -> np.ndarray:
    """``D[i, S]`` as the decoder computes it, from the exact integer squared distance."""
    participants = [int(i) for i in request["participants"]]
    sets = [c["members"] for c in request["clusters"]] + [p["members"] for p in request["probes"]]
    q = quantized_prompts(kit, params, number, participants)
    s2 = float(params.clustering_field.scale) ** 2
    out = np.zeros((len(participants), len(sets)))
    for col, members in enumerate(sets):
        m = len(members)
        total = sum(q[i] for i in members)
        for row, i in enumerate(participants):
            diff = m * q[i] - total
            exact = int(np.dot(diff, diff))
            out[row, col] = np.float64(exact) / (s2 * np.float64(m) ** 2)
    return out


def exact_mean(kit: Any, params: CryptoParams, number: int, members: Sequence[int]) -> np.ndarray:
    """The decoded cluster mean: the exact integer sum of the quantized updates / s / m."""
    spec = params.aggregation_field
    total = sum(
        np.round(kit.update_vector(i, number) * spec.scale).astype(np.int64) for i in members
    )
    return np.asarray(total, dtype=np.float64) / float(spec.scale) / len(members)


def envelope_rows(db_url: str) -> list[tuple[int, int, str]]:
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(ShareEnvelope.sender, ShareEnvelope.recipient, ShareEnvelope.kind)
            )
            return [(int(a), int(b), str(k)) for a, b, k in rows]
    finally:
        engine.dispose()


def aggregated_sets(status: dict[str, Any]) -> list[tuple[int, list[int]]]:
    """``(cluster, members summed)`` of the transition into ``published``."""
    event = next(e for e in status["events"] if e["to_stage"] == "published")
    present = set(status["present"])
    clusters = {c["cluster"]: c["members"] for c in status["clusters"]}
    return [(c, sorted(set(clusters[c]) & present)) for c in event["detail"]["aggregated"]]


def check_published_means(
    kit: Any,
    params: CryptoParams,
    status: dict[str, Any],
    before: dict[int, np.ndarray],
    after: dict[int, np.ndarray],
) -> int:
    """Each aggregated cluster that kept its id and absorbed nobody moved by exactly its
    exact mean (a split child starts from the same prompt; a merge mixes two)."""
    clustering = [e for e in status["events"] if e["to_stage"] == "aggregation"]
    merges = clustering[0]["detail"].get("merges", []) if clustering else []
    mixed = {m["kept"] for m in merges}
    checked = 0
    for cluster, members in aggregated_sets(status):
        if cluster in mixed or cluster not in before or cluster not in after:
            continue
        expected = before[cluster] + 1.0 * exact_mean(kit, params, status["number"], members)
        np.testing.assert_array_equal(after[cluster], expected)
        checked += 1
    return checked


# -- the full path -----------------------------------------------------------------------
def attestation_rows(db_url: str) -> list[tuple[str, int, int]]:
    """``(stage, sender, recipient)`` of every stored attestation."""
    engine = make_engine(db_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(Attestation.stage, Attestation.sender, Attestation.recipient)
            )
            return [(str(st), int(s), int(r)) for st, s, r in rows]
    finally:
        engine.dispose()


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_committee_rounds_decode_exactly_and_only_members_compute(
    federation: Any, kit: Any, db_url: str
) -> None:
    f = federation
    params = f.engines[0].params
    assert (params.code_points, params.committee_size) == (kit.C, kit.C)
    assert f.federation["config"]["crypto"]["committee_size"] == kit.C

    number = f.start_round()
    task = f.task(0)
    announced = task["committee"]
    assert announced["size"] == kit.C
    assert announced["roster"] == list(range(kit.N))
    members = announced["members"]
    beacon = bytes.fromhex(announced["beacon"])
    assert len(beacon) == 32
    assert tuple(members) == round_committee(f.id, number, list(range(kit.N)), beacon, kit.C)
    assert task["sharing"]["recipients"] == members
    started = f.status(number)["events"][0]
    assert started["detail"]["committee"] == members
    assert started["detail"]["beacon"] == announced["beacon"]
    outsiders = sorted(set(range(kit.N)) - set(members))
    seen: dict[str, dict[str, Any]] = {}

    def watch(stage: str, n: int) -> None:
        if stage == "distances" and "distances" not in seen:
            seen["distances"] = f.task(members[0])["distances"]
            outsider = f.task(outsiders[0])
            assert outsider["action"] == "wait"
            assert outsider["distances"] is None
            with pytest.raises(RequestRefusedError) as info:  # no inbox for outsiders
                f.engines[outsiders[0]].client.inbox("me", n)
            assert info.value.code == "not_expected"
            with pytest.raises(RequestRefusedError) as info:  # and no coded result
                f.engines[outsiders[0]].client.upload_result(n, "distances", b"x", "0" * 64)
            assert info.value.code == "not_expected"
            with pytest.raises(RequestRefusedError) as info:  # nor an attestation
                f.engines[outsiders[0]].client.attest(
                    n, "distances", "0" * 64, {members[0]: b"m" * 32}
                )
            assert info.value.code == "not_expected"
        if stage == "aggregation":
            assert f.task(outsiders[-1])["aggregation"] is None

    f.run_round(number=number, watch=watch)
    status = f.status(number)
    assert status["stage"] == "published", status["failure_reason"]
    assert status["committee"] == members
    assert status["uploads"]["sharing"] == list(range(kit.N))
    assert status["uploads"]["distances"] == members
    assert status["uploads"]["aggregation"] == members
    assert status["rejected"] == {"distances": [], "aggregation": []}
    # N * c * 2 kinds (prompt, update) and a zero-sharing (as a seed or a vector) from each
    # of the round's contributors (a default committee federation of this size
    # re-randomizes its distances), to members only
    rows = envelope_rows(db_url)
    assert f.federation["config"]["crypto"]["rerandomize_distances"] is True
    assert {k for _, _, k in rows} == {"prompt", "update", "zero", "zero-seed"}
    contributors = status["zero_contributors"]
    assert len(rows) == (kit.N * 2 + len(contributors)) * kit.C
    assert {s for s, _, k in rows if k.startswith("zero")} == set(contributors)
    assert {r for _, r, _ in rows} == set(members)
    assert {s for s, _, _ in rows} == set(range(kit.N))
    # Agreement among members only: each member attested to the c - 1 others, per stage.
    attested = attestation_rows(db_url)
    for stage in ("distances", "aggregation"):
        pairs = {(s, r) for st, s, r in attested if st == stage}
        assert pairs == {(s, r) for s in members for r in members if s != r}
    point = np.asarray(status["distances"]["point"])
    np.testing.assert_array_equal(
        point, exact_point_distances(kit, params, number, seen["distances"])
    )
    # (whether round 1 already parts the groups depends on its probe, a public hash of
    # the random federation id: not asserted here)

    # Round 2: a fresh committee; every cluster moves by exactly its members' mean.
    before = f.prompts(number)
    second = f.run_round()
    status = f.status(second)
    assert status["stage"] == "published", status["failure_reason"]
    assert (
        status["committee"] != members
        or status["events"][0]["detail"]["beacon"] != (announced["beacon"])
    )
    assert status["uploads"]["aggregation"] == status["committee"]
    assert check_published_means(kit, params, status, before, f.prompts(second)) >= 1


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_a_dropped_outsider_removes_only_its_own_input(federation: Any, kit: Any) -> None:
    f = federation
    first = f.run_round()
    assert f.status(first)["stage"] == "published"
    before = f.prompts(first)
    number = f.start_round()
    members = f.task(0)["committee"]["members"]
    outsider = next(i for i in range(kit.N) if i not in members)
    seen: dict[str, Any] = {}

    def watch(stage: str, n: int) -> None:
        if stage == "distances":
            seen.setdefault("distances", f.task(members[0])["distances"])

    f.run_round({"sharing": {outsider}}, number=number, watch=watch)
    status = f.status(number)
    assert status["stage"] == "published", status["failure_reason"]
    assert status["dropped"] == {str(outsider): "sharing"}
    assert status["present"] == [i for i in range(kit.N) if i != outsider]
    assert status["uploads"]["distances"] == members  # every member still computed
    assert outsider not in seen["distances"]["participants"]
    params = f.engines[0].params
    np.testing.assert_array_equal(
        np.asarray(status["distances"]["point"]),
        exact_point_distances(kit, params, number, seen["distances"]),
    )
    assert all(outsider not in m for _, m in aggregated_sets(status))
    assert check_published_means(kit, params, status, before, f.prompts(number)) >= 1


@pytest.mark.slow  # over 7 s in the inner loop (bash dev.sh quick)
def test_member_dropouts_within_the_bound_are_tolerated_beyond_it_fail(
    federation: Any, kit: Any
) -> None:
    f = federation
    first = f.run_round()
    before = f.prompts(first)
    number = f.start_round()
    members = f.task(0)["committee"]["members"]
    # D = floor(0.25 * 7) = 1 member may miss the aggregation stage (R_a = 6 of 7).
    f.run_round({"aggregation": {members[2]}}, number=number)
    status = f.status(number)
    assert status["stage"] == "published", status["failure_reason"]
    assert status["dropped"] == {str(members[2]): "aggregation"}
    assert status["uploads"]["aggregation"] == [m for m in members if m != members[2]]
    params = f.engines[0].params
    assert check_published_means(kit, params, status, before, f.prompts(number)) >= 1

    # Two silent members in the distance stage (R_c = 5 of 7) leave 5 for aggregation,
    # which needs 6: the round fails with a clear reason, nothing is decoded wrongly.
    number = f.start_round()
    members = f.task(0)["committee"]["members"]
    f.run_round({"distances": {members[0], members[-1]}}, number=number)
    status = f.status(number)
    assert status["stage"] == "failed"
    assert "only 5 participants remain, the stage needs 6" in status["failure_reason"]
    assert status["uploads"]["distances"] == members[1:-1]


@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
def test_a_wrong_member_result_is_corrected_and_named(federation: Any, kit: Any) -> None:
    f = federation
    number = f.start_round()
    members = f.task(0)["committee"]["members"]
    liar = members[3]
    client = f.engines[liar].client
    honest_upload = client.upload_result
    prime = f.engines[liar].params.clustering_field.prime

    def corrupt(n: int, stage: str, payload: bytes, digest: str) -> Any:
        if stage == "distances":
            values = unpack_field_vector(payload, prime=prime)
            values[0] = (values[0] + 1) % prime
            payload = pack_field_vector(values, prime=prime)
        return honest_upload(n, stage, payload, digest)

    client.upload_result = corrupt
    seen: dict[str, Any] = {}

    def watch(stage: str, n: int) -> None:
        if stage == "distances":
            seen.setdefault("distances", f.task(members[0])["distances"])

    f.run_round(number=number, watch=watch)
    status = f.status(number)
    assert status["stage"] == "published", status["failure_reason"]
    assert status["rejected"]["distances"] == [liar]  # a participant index, not a point
    np.testing.assert_array_equal(
        np.asarray(status["distances"]["point"]),
        exact_point_distances(kit, f.engines[0].params, number, seen["distances"]),
    )
