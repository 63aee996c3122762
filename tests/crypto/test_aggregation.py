"""Cluster-wise secure aggregation and the participant's refusal rules."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfpp.crypto.aggregation import clip_update, decode_cluster_mean, member_sums, prepare_update
from secfpp.crypto.errors import ParameterError, RefusalError
from secfpp.crypto.field import PrimeField
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.refusal import (
    check_aggregation_request,
    check_distance_request,
    check_same_request,
    request_digest,
)
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.secpc import ReferenceSets


def test_cluster_means_equal_plaintext_means() -> None:
    params = CryptoParams.for_federation(10, l2_clip=4.0)
    spec, code = params.aggregation_field, params.aggregation_lcc()
    rng = DeterministicRandom(7)
    d = 1000
    updates = np.random.default_rng(0).normal(0, 0.02, (10, d))
    clusters = [(0, 1, 2, 3), (4, 5, 6, 7, 8, 9)]
    q = [prepare_update(u, spec, l2_clip=params.l2_clip, rng=rng) for u in updates]
    shares = [code.share(v, rng) for v in q]
    sums = {
        j: member_sums(code.field, {i: shares[i][j] for i in range(10)}, clusters)
        for j in range(2, 10)  # two participants drop out of the aggregation stage
    }
    for c, members in enumerate(clusters):
        mean, decoded = decode_cluster_mean(
            code, {j: s[c] for j, s in sums.items()}, length=d, spec=spec, contributors=len(members)
        )
        expected = updates[list(members)].mean(axis=0)
        # Stochastic rounding: each entry is off by less than one quantum 2**-bits.
        assert np.max(np.abs(mean - expected)) < 2.0**-spec.bits
        assert decoded.rejected == ()


def test_stochastic_rounding_is_unbiased() -> None:
    params = CryptoParams.for_federation(10)
    spec = params.aggregation_field
    value = np.full(200_000, 0.3 / 2**spec.bits)  # a third of a quantum
    q = prepare_update(value, spec, l2_clip=1e9, rng=DeterministicRandom(1))
    # Mean of Bernoulli(0.3): std 0.46/sqrt(2e5) ~ 0.001; 6 sigma margin.
    assert abs(float(np.mean(q)) - 0.3) < 0.006


def test_clip_update_bounds_norm_and_entries() -> None:
    clipped = clip_update(np.full(100, 1.0), l2_clip=2.0, entry_clip=0.15)
    assert np.linalg.norm(clipped) <= 2.0 + 1e-12
    assert np.max(np.abs(clipped)) <= 0.15
    with pytest.raises(ParameterError, match="finite"):
        clip_update(np.array([np.nan]), l2_clip=1.0, entry_clip=1.0)


def test_member_sums_needs_every_share() -> None:
    params = CryptoParams.for_federation(8)
    with pytest.raises(ParameterError, match=r"participants \[2\]"):
        member_sums(params.aggregation_field.field, {0: np.zeros(3, np.int64)}, [(0, 2)])


@given(
    prime=st.sampled_from([3, 65521, 2**31 - 1, 2**61 - 1]),
    n=st.integers(1, 12),
    length=st.integers(1, 9),
    sets=st.lists(st.lists(st.integers(0, 11), min_size=1, max_size=12), min_size=1, max_size=4),
    seed=st.integers(0, 2**32 - 1),
)
def test_member_sums_equal_integer_sums(
    prime: int, n: int, length: int, sets: list[list[int]], seed: int
) -> None:
    """Every set's sum mod p, against Python integers, for narrow and wide primes."""
    rng = np.random.default_rng(seed)
    shares = {i: rng.integers(0, prime, length, dtype=np.int64) for i in range(n)}
    shares[0][:] = prime - 1  # the largest entries
    member_sets = [[i % n for i in members] for members in sets]
    got = member_sums(PrimeField(prime), shares, member_sets)
    want = [
        [sum(int(shares[i][col]) for i in members) % prime for col in range(length)]
        for members in member_sets
    ]
    assert got.dtype == np.int64
    assert got.tolist() == want


def test_member_sums_name_the_share_out_of_range_and_take_any_integers() -> None:
    field = PrimeField(2**31 - 1)
    shares = {i: np.full(4, i, dtype=np.int64) for i in range(5)}
    for bad in (-1, field.prime):
        broken = dict(shares)
        broken[3] = np.array([0, 1, bad, 2], dtype=np.int64)
        with pytest.raises(ParameterError, match=r"shares\[3\]"):
            member_sums(field, broken, [(0, 1), (1, 2, 3, 4)])
    # Lists and other integer dtypes take the general path, with the same result.
    mixed = {0: [1, 2, 3, 4], 1: np.arange(4, dtype=np.int32), 2: np.full(4, 5, np.int64)}
    assert member_sums(field, mixed, [(0, 1, 2)]).tolist() == [[6, 8, 10, 12]]


def test_asarray_reduces_every_integer() -> None:
    for prime in (3, 2**31 - 1, 2**61 - 1):
        field = PrimeField(prime)
        values = np.array([0, 1, -1, prime - 1, -prime, prime, -prime - 1, 2 * prime + 3, -(2**62)])
        expected = [int(v) % prime for v in values.tolist()]
        assert field.asarray(values).tolist() == expected
        assert field.asarray(values.astype(object)).tolist() == expected
        small = values[np.abs(values) < prime]
        assert field.asarray(small).tolist() == [int(v) % prime for v in small.tolist()]
        assert field.asarray(small) is not small


# --- refusal rules -------------------------------------------------------------------------


def test_aggregation_refusals() -> None:
    ok = [(0, 1, 2), (3, 4, 5)]
    check_aggregation_request(ok, min_size=3, have_shares_from=range(6))
    cases = [
        ([(0, 1, 2), (2, 3, 4)], "overlapping_sets"),
        ([(0, 1, 2), (3, 4)], "set_too_small"),
        ([(0, 1, 1)], "overlapping_sets"),
        ([], "empty_request"),
    ]
    for sets, reason in cases:
        with pytest.raises(RefusalError) as info:
            check_aggregation_request(sets, min_size=3, have_shares_from=range(6))
        assert info.value.reason == reason
    with pytest.raises(RefusalError) as info:
        check_aggregation_request(ok, min_size=3, have_shares_from=range(5))
    assert info.value.reason == "missing_share"


def test_distance_refusals() -> None:
    refs = ReferenceSets(tuple(range(6)), ((0, (0, 1, 2)), (1, (3, 4, 5))))
    check_distance_request(refs, have_shares_from=range(6), min_reference_size=2)
    halves = ((0, (0, 1, 2, 3, 4, 5)), (1, (6, 7, 8, 9, 10, 11)))
    probed = ReferenceSets(tuple(range(12)), halves, ((0, (0, 1, 2)),))
    check_distance_request(probed, have_shares_from=range(12), min_reference_size=2)
    six = tuple(range(6))
    bad = [
        (ReferenceSets(six, ((0, (0, 1, 2)), (1, (2, 4, 5)))), "overlapping_sets"),
        # Singleton centres: a cluster of one, a probe of one, a probe leaving one.
        (ReferenceSets(six, ((0, (0,)), (1, (3, 4, 5)))), "set_too_small"),
        (ReferenceSets(six, ((0, (0, 1, 2, 3, 4, 5)),), ((0, (2,)),)), "set_too_small"),
        (ReferenceSets(six, ((0, (0, 1, 2, 3, 4, 5)),), ((0, (0, 1, 2, 3, 4)),)), "set_too_small"),
    ]
    for request, reason in bad:
        with pytest.raises(RefusalError) as info:
            check_distance_request(request, have_shares_from=range(6), min_reference_size=2)
        assert info.value.reason == reason
    # No policy allows centres of fewer than three (crypto.refset_rules.REFERENCE_FLOOR).
    for minimum in (1, 2):
        with pytest.raises(RefusalError, match="minimum 3"):
            check_distance_request(bad[1][0], have_shares_from=range(6), min_reference_size=minimum)
    with pytest.raises(RefusalError) as info:
        check_distance_request(refs, have_shares_from=[0, 1, 2, 3, 4], min_reference_size=2)
    assert info.value.reason == "missing_share"


def test_conflicting_request_refused() -> None:
    first = request_digest({"round": 3, "sets": [[0, 1, 2]]})
    check_same_request(None, first)
    check_same_request(first, request_digest({"sets": [[0, 1, 2]], "round": 3}))
    with pytest.raises(RefusalError) as info:
        check_same_request(first, request_digest({"round": 3, "sets": [[0, 1, 2, 3]]}))
    assert info.value.reason == "conflicting_request"
