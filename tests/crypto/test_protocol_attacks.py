"""The coordinator plays each attack of docs/protocol.md section 7, and learns nothing more."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from crypto.aggregation import member_sums
from crypto.clustering import Membership
from crypto.errors import DecodeError, ParameterError, RefusalError
from crypto.params import CodeSpec, CryptoParams
from crypto.quantize import quantize
from crypto.refset_rules import effective_minimum
from crypto.refusal import (
    aggregation_request_digest,
    check_aggregation_request,
    check_distance_request,
    check_same_request,
    distance_request_digest,
)
from crypto.rng import DeterministicRandom
from crypto.secpc import ReferenceSets, coded_distances, decode_distances, plaintext_distances


def test_curious_coordinator_decodes_only_totals() -> None:
    """N = 64 with r = 8: the old parameters chunked the reduced prompt into K_c >= r pieces,
    so each decoded chunk value was one coordinate's squared difference. Now the decode holds
    exactly one value per (participant, reference set): the total."""
    n, r = 64, 8
    params = CryptoParams.for_federation(n, reduced_dim=r)
    assert params.clustering_code.k == 1
    code = params.clustering_lcc()
    spec = params.clustering_field
    rng = np.random.default_rng(0)
    vectors = rng.uniform(-1, 1, (n, r))
    quantized = [quantize(v, spec.field, bits=spec.bits, clip=spec.clip) for v in vectors]
    real = np.vstack([spec.field.centered(q) / spec.scale for q in quantized])
    source = DeterministicRandom(1)
    shares = [code.share(q, source) for q in quantized]
    refs = ReferenceSets(tuple(range(n)), ((0, tuple(range(n))),))
    results = {
        j: coded_distances(spec.field, {i: shares[i][j] for i in range(n)}, refs)
        for j in range(code.recovery_threshold(2))
    }
    distances, decoded = decode_distances(code, results, refs, spec)
    # One row of decoded values: the coordinator never holds a per-coordinate partial.
    assert decoded.values.shape == (1, refs.result_length)
    np.testing.assert_allclose(distances.point, plaintext_distances(real, refs).point, rtol=1e-9)
    # The chunked code the issue describes is refused outright.
    with pytest.raises(ParameterError, match="K = 1"):
        CryptoParams(
            n_participants=n,
            reduced_dim=r,
            clustering_code=CodeSpec(16, 16),
            aggregation_code=params.aggregation_code,
        )


def test_participants_refuse_singleton_centres() -> None:
    n = 8
    everyone = tuple(range(n))
    singleton_cluster = ReferenceSets(everyone, ((0, (0,)), (1, tuple(range(1, n)))))
    singleton_probe = ReferenceSets(everyone, ((0, everyone),), ((0, (3,)),))
    leaves_one = ReferenceSets(everyone, ((0, everyone),), ((0, tuple(range(1, n))),))
    for refs in (singleton_cluster, singleton_probe, leaves_one):
        with pytest.raises(RefusalError) as info:
            check_distance_request(refs, have_shares_from=everyone, min_reference_size=2)
        assert info.value.reason == "set_too_small"


@settings(max_examples=60, deadline=None)
@given(
    labels=st.lists(st.integers(0, 3), min_size=2, max_size=30),
    absent=st.sets(st.integers(0, 29), max_size=10),
    minimum=st.integers(2, 4),
    salt=st.text(max_size=6),
)
def test_the_coordinator_never_asks_what_participants_refuse(
    labels: list[int], absent: set[int], minimum: int, salt: str
) -> None:
    """Whatever the membership and whoever is present, the reference sets the coordinator
    builds pass every participant's check."""
    n = len(labels)
    clusters = tuple((c, tuple(i for i in range(n) if labels[i] == c)) for c in sorted(set(labels)))
    probes = tuple((c, m[: len(m) // 2]) for c, m in clusters if len(m) > 1)
    membership = Membership(clusters, probes, next_id=4)
    present = [i for i in range(n) if i not in absent]
    floor = effective_minimum(minimum)  # what the coordinator uses (never below 3)
    refs = membership.reference_sets(
        present, min_aggregation_size=3, min_reference_size=floor, salt=salt
    )
    if refs is None:
        assert all(sum(m in present for m in members) < floor for _, members in clusters)
        return
    check_distance_request(refs, have_shares_from=present, min_reference_size=minimum)


def test_equivocating_coordinator_learns_nothing() -> None:
    """The coordinator shows {0,1,2,3} to participants 0-3 and {0,1,2} to 4-7 and hopes to
    decode both sums and subtract: participant 3's update. Every threshold exceeds N/2, so
    neither half decodes, and a participant asked both refuses the second."""
    n, d = 8, 5
    params = CryptoParams.for_federation(n, reduced_dim=4)
    code = params.aggregation_lcc()
    spec = params.aggregation_field
    assert 2 * code.recovery_threshold(1) > n
    rng = np.random.default_rng(3)
    updates = [
        quantize(rng.uniform(-1, 1, d), spec.field, bits=spec.bits, clip=spec.clip)
        for _ in range(n)
    ]
    source = DeterministicRandom(4)
    shares = [code.share(u, source) for u in updates]
    first, second = [(0, 1, 2, 3)], [(0, 1, 2)]
    answers: dict[int, np.ndarray] = {}
    answered: dict[int, str] = {}
    for j in range(n):
        sets = first if j < 4 else second
        check_aggregation_request(sets, min_size=3, have_shares_from=range(n))  # permitted
        answered[j] = aggregation_request_digest("fed", 1, sets)
        mine = {i: shares[i][j] for i in range(n)}
        answers[j] = member_sums(spec.field, mine, sets)[0]
    for group in (range(4), range(4, 8)):
        with pytest.raises(DecodeError, match="need"):
            code.decode({j: answers[j] for j in group}, degree=1)
    # Participant 3 asked the other request as well refuses it.
    with pytest.raises(RefusalError) as info:
        check_same_request(answered[3], aggregation_request_digest("fed", 1, second))
    assert info.value.reason == "conflicting_request"
    # Parameters that would let each half decode on its own are refused.
    with pytest.raises(ParameterError, match="equivocation"):
        CryptoParams.for_federation(n, reduced_dim=4, dropout_fraction=0.5)


def test_request_digests_bind_every_part_of_the_request() -> None:
    refs = ReferenceSets((0, 1, 2, 3, 4, 5), ((0, (0, 1, 2, 3, 4, 5)),), ((0, (0, 1, 2)),))
    base = distance_request_digest("fed", 2, refs)
    assert base == distance_request_digest("fed", 2, refs)
    other_probe = ReferenceSets(refs.participants, refs.clusters, ((0, (0, 1, 3)),))
    for changed in (
        distance_request_digest("fed2", 2, refs),
        distance_request_digest("fed", 3, refs),
        distance_request_digest("fed", 2, other_probe),
        aggregation_request_digest("fed", 2, [(0, 1, 2, 3, 4, 5)]),
    ):
        assert changed != base
