"""Re-randomization by a named subset of contributors (docs/protocol.md section 4, "Who
contributes"): ``T + 1`` of them suffice, fewer do not, and recipients refuse fewer.

The oracle of :mod:`tests.crypto.test_rerandomize` again: fixed data, fresh randomness, the
polynomial the coordinator decodes interpolated away from the data point. Colluding
contributors send the zero polynomial (they know their own contribution, so it might as well
be zero). With one honest contributor among the named ones the off-point evaluations are
uniform; with colluders only they are the plain path's perfect squares, which is why a
participant refuses a request naming fewer than ``T + 1``.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfpp.crypto.errors import ParameterError, RefusalError
from secfpp.crypto.field import PrimeField
from secfpp.crypto.lcc import LagrangeCode
from secfpp.crypto.params import FieldSpec
from secfpp.crypto.refusal import (
    check_zero_contributors,
    distance_request_digest,
    request_digest,
)
from secfpp.crypto.rerandomize import (
    ZeroSharing,
    checked_distances,
    contributor_floor,
    contributors_wanted,
    rerandomized_distances,
)
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.secpc import ReferenceSets, coded_distances, decode_distances
from tests.crypto.test_rerandomize import (
    SMALL,
    _chi_square_pvalues,
    _interpolate,
    _residue_fraction,
)

_VALUES = [1, 0, -1, 1, 0]  # r = 1; every squared distance below (p - 1) / 2


def _samples(contributors: tuple[int, ...], colluders: set[int], runs: int) -> np.ndarray:
    """Decoded polynomials' values at the data point and at ``z = 0, 2, 3``: (runs, 4, m),
    when the request names ``contributors`` and the ``colluders`` among them contribute 0."""
    field = PrimeField(SMALL)
    code = LagrangeCode(field, k=1, t=1, n=5)  # T = 1: two named contributors suffice
    data = {i: field.asarray([v % SMALL]) for i, v in enumerate(_VALUES)}
    refs = ReferenceSets(tuple(range(5)), ((0, (0, 1, 2)), (1, (3, 4))), contributors=contributors)
    rng = DeterministicRandom(b"named" + bytes(contributors))
    zeros = ZeroSharing(code)
    out = []
    for _ in range(runs):
        shares = {i: code.share(data[i], rng) for i in refs.participants}
        contributions = {
            i: (
                np.zeros((code.n, refs.result_length), dtype=np.int64)
                if i in colluders
                else zeros.contribute(refs.result_length, rng)
            )
            for i in contributors
        }
        results = {
            j: rerandomized_distances(
                field,
                {i: shares[i][j] for i in refs.participants},
                {i: contributions[i][j] for i in contributors},
                refs,
            )
            for j in range(code.n)
        }
        out.append(_interpolate(code, results, [1, 0, 2, 3]))
    return np.stack(out)


@pytest.mark.slow  # about 4 s: left out of the inner loop (bash dev.sh quick)
def test_one_honest_named_contributor_makes_the_polynomial_uniform() -> None:
    # T = 1: participants 0 and 3 are named (T + 1 = 2), 0 colludes and contributes 0
    samples = _samples((0, 3), colluders={0}, runs=2000)
    field = PrimeField(SMALL)
    data = {i: field.asarray([v % SMALL]) for i, v in enumerate(_VALUES)}
    refs = ReferenceSets(tuple(range(5)), ((0, (0, 1, 2)), (1, (3, 4))))
    expected = coded_distances(field, data, refs)
    assert (samples[:, 0, :] == expected[None, :]).all()  # the true distances, every run
    assert min(_chi_square_pvalues(samples)) > 1e-4
    assert abs(_residue_fraction(samples) - 52 / SMALL) < 0.02


def test_colluders_alone_leave_the_plain_polynomial() -> None:
    """Why the floor: a request naming only colluders re-randomizes nothing."""
    samples = _samples((0,), colluders={0}, runs=300)
    assert _residue_fraction(samples) == 1.0  # every decoded polynomial a perfect square


def test_recipients_refuse_fewer_than_t_plus_one() -> None:
    refs = ReferenceSets(tuple(range(6)), ((0, (0, 1, 2)), (1, (3, 4, 5))), contributors=(0, 4))
    with pytest.raises(RefusalError) as info:
        check_zero_contributors(refs, have_contributions_from=range(6), colluders=2)
    assert info.value.reason == "too_few_contributors"
    assert "2 zero-sharing contributors, fewer than the 3" in str(info.value)
    check_zero_contributors(refs, have_contributions_from=(0, 4), colluders=1)  # T + 1 = 2
    with pytest.raises(RefusalError) as info:  # a named contributor's zero did not open
        check_zero_contributors(refs, have_contributions_from=(0, 1, 2), colluders=1)
    assert info.value.reason == "missing_share"
    assert "[4]" in str(info.value)
    with pytest.raises(RefusalError) as info:  # noise: every present participant adds it
        check_zero_contributors(refs, have_contributions_from=range(6), colluders=1, noisy=True)
    assert info.value.reason == "too_few_contributors"
    everyone = ReferenceSets(tuple(range(6)), ((0, (0, 1, 2)), (1, (3, 4, 5))))
    with pytest.raises(RefusalError) as info:  # unnamed: every participant's zero is needed
        check_zero_contributors(everyone, have_contributions_from=range(5), colluders=5)
    assert info.value.reason == "missing_share"
    check_zero_contributors(everyone, have_contributions_from=range(6), colluders=5, noisy=True)


def test_the_digest_binds_the_named_contributors() -> None:
    sets = ((0, (0, 1, 2)), (1, (3, 4, 5)))
    unnamed = ReferenceSets(tuple(range(6)), sets)
    a = ReferenceSets(tuple(range(6)), sets, contributors=(0, 1, 2))
    b = ReferenceSets(tuple(range(6)), sets, contributors=(0, 1, 3))
    digests = {distance_request_digest("f", 1, r) for r in (unnamed, a, b)}
    assert len(digests) == 3
    # a request of an earlier release (no contributors) keeps its digest
    assert distance_request_digest("f", 1, unnamed) == request_digest(
        {
            "federation": "f",
            "round": 1,
            "stage": "distances",
            "participants": list(range(6)),
            "clusters": [[0, [0, 1, 2]], [1, [3, 4, 5]]],
            "probes": [],
        }
    )


def test_reference_sets_refuse_unsorted_contributors() -> None:
    sets = ((0, (0, 1, 2)),)
    with pytest.raises(ParameterError, match="contributors"):
        ReferenceSets((0, 1, 2), sets, contributors=(2, 1))
    with pytest.raises(ParameterError, match="contributors"):
        ReferenceSets((0, 1, 2), sets, contributors=(1, 1))
    # a contributor need not be a row: a member of a cluster too small to measure
    assert ReferenceSets((0, 1, 2), sets, contributors=(1, 7)).zero_contributors == (1, 7)
    assert ReferenceSets((0, 1, 2), sets).zero_contributors == (0, 1, 2)


def test_named_contributors_decode_exactly_with_offset_checks() -> None:
    """Outputs then one check per named contributor; the decode equals the plain path's."""
    field = PrimeField(2**61 - 1)
    code = LagrangeCode(field, k=1, t=2, n=9)
    rng = DeterministicRandom(b"checks")
    x = {i: field.asarray(np.random.default_rng(i).integers(0, 50, 4)) for i in range(9)}
    refs = ReferenceSets(
        tuple(range(9)), ((0, (0, 1, 2, 3)), (1, (4, 5, 6, 7, 8))), contributors=(1, 4, 8)
    )
    shares = {i: code.share(x[i], rng) for i in range(9)}
    length = refs.result_length + 1
    contributions = {i: ZeroSharing(code).contribute(length, rng) for i in (1, 4, 8)}
    challenge = bytes(range(32))
    results = {
        j: checked_distances(
            field,
            {i: shares[i][j] for i in range(9)},
            {i: contributions[i][j] for i in (1, 4, 8)},
            refs,
            challenge,
        )
        for j in range(9)
    }
    assert {v.shape for v in results.values()} == {(refs.result_length + 3,)}
    spec = FieldSpec(prime=field.prime, bits=8, clip=4.0)
    got, _ = decode_distances(code, results, refs, spec, checked=refs.zero_contributors)
    plain = {j: coded_distances(field, {i: shares[i][j] for i in range(9)}, refs) for j in range(9)}
    want, _ = decode_distances(code, plain, refs, spec)
    np.testing.assert_array_equal(got.point, want.point)


@given(
    n=st.integers(min_value=0, max_value=5000),
    t=st.integers(min_value=0, max_value=2000),
    d=st.integers(min_value=0, max_value=2000),
)
def test_contributors_wanted_leaves_the_floor_after_the_dropouts(n: int, t: int, d: int) -> None:
    k = contributors_wanted(n, t, d)
    assert k == min(n, t + 1 + d)
    if k < n:  # a subset: after any d of them drop, T + 1 remain
        assert k - d >= contributor_floor(t)
