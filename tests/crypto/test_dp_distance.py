"""Distributed DP noise on the distance stage (issue 26 item 2, crypto/dp/distance.py).

The noise rides on the re-randomizing polynomial: its value at the data point is the
contributor's discrete Gaussian share. Checked here: the decoded values are the true
integer distances plus the sum of the contributors' noise, exactly; that sum has the
distribution of a sum of discrete Gaussians (moments and a chi-square against the exact
convolution); the decoder still corrects wrong results; the sensitivity bound holds
against brute force; the ledger records the release; bad parameters are refused by name.
"""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import numpy as np
import pytest
from scipy.stats import chi2, chisquare

from secfpp.crypto.dp.discrete import discrete_gaussian_variance
from secfpp.crypto.dp.distance import (
    DistanceNoise,
    distance_noise_bits,
    distance_sensitivity,
    with_distance_noise_headroom,
)
from secfpp.crypto.dp.ledger import LedgerRecord, epsilon_by_participant, epsilon_spent
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.field import PrimeField
from secfpp.crypto.lcc import LagrangeCode
from secfpp.crypto.params import CryptoParams, FieldSpec
from secfpp.crypto.quantize import quantize
from secfpp.crypto.rerandomize import ZeroSharing, rerandomize, rerandomized_distances
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.secpc import ReferenceSets, coded_distances, decode_distances

P = 2**61 - 1
REFS = ReferenceSets(
    participants=tuple(range(7)),
    clusters=((0, (0, 1, 2)), (1, (3, 4, 5, 6))),
    probes=((1, (3, 4, 5)),),
)


def _noisy_stage(
    code: LagrangeCode,
    data: dict[int, np.ndarray],
    noise: dict[int, np.ndarray],
    refs: ReferenceSets,
    seed: int,
) -> dict[int, np.ndarray]:
    """Every present participant shares its data and its noise-carrying contribution."""
    rng = DeterministicRandom(seed)
    shares = {i: code.share(data[i], rng) for i in refs.participants}
    sharing = ZeroSharing(code)
    length = refs.result_length
    contributions = {i: sharing.contribute(length, rng, values=noise[i]) for i in refs.participants}
    results = {}
    for j in range(code.n):
        mine = {i: shares[i][j] for i in refs.participants}
        received = {i: contributions[i][j] for i in refs.participants}
        results[j] = rerandomized_distances(code.field, mine, received, refs)
    return results


def _data(seed: int, r: int = 5, bound: int = 40) -> dict[int, np.ndarray]:
    gen = np.random.default_rng(seed)
    field = PrimeField(P)
    return {i: np.mod(gen.integers(-bound, bound + 1, r), field.prime) for i in REFS.participants}


def _true(data: dict[int, np.ndarray]) -> np.ndarray:
    """The integer distances every recipient would compute on the data themselves."""
    field = PrimeField(P)
    return field.centered(coded_distances(field, data, REFS))


def test_decoded_minus_true_is_the_sum_of_the_contributors_noise_exactly() -> None:
    field = PrimeField(P)
    code = LagrangeCode(field, k=1, t=2, n=12)
    data = _data(1)
    gen = np.random.default_rng(11)  # arbitrary signed test values
    noise = {i: gen.integers(-(10**6), 10**6 + 1, REFS.result_length) for i in REFS.participants}
    results = _noisy_stage(code, data, noise, REFS, seed=2)
    decoded = code.decode(results, degree=2)
    got = field.centered(decoded.values[0])
    expected_noise = np.sum(np.vstack(list(noise.values())), axis=0)
    assert np.array_equal(got - _true(data), expected_noise)
    assert expected_noise.any()  # the test would notice noise that went missing


def test_the_noise_share_of_distance_noise_is_what_is_decoded() -> None:
    """With the mechanism's own sampler (deterministic RNG), replayed draw for draw."""
    field = PrimeField(P)
    code = LagrangeCode(field, k=1, t=2, n=12)
    mech = DistanceNoise(
        noise_multiplier=0.5,
        l2_clip=1.0,
        bits=2,
        reduced_dim=5,
        min_reference=3,
        min_contributors=3,
    )
    length = REFS.result_length
    noise = {i: mech.share(length, rng=DeterministicRandom(i)) for i in REFS.participants}
    replay = {i: mech.share(length, rng=DeterministicRandom(i)) for i in REFS.participants}
    data = _data(3)
    results = _noisy_stage(code, data, noise, REFS, seed=4)
    got = field.centered(code.decode(results, degree=2).values[0])
    assert np.array_equal(got - _true(data), np.sum(np.vstack(list(replay.values())), axis=0))


def test_decoding_still_corrects_wrong_results_with_noise_on() -> None:
    field = PrimeField(P)
    code = LagrangeCode(field, k=1, t=2, n=13)  # degree 4: 5 needed, 8 spare -> 4 errors
    data = _data(5)
    rng = DeterministicRandom(b"wrong")
    gen = np.random.default_rng(12)
    noise = {i: gen.integers(-1000, 1001, REFS.result_length) for i in REFS.participants}
    results = _noisy_stage(code, data, noise, REFS, seed=6)
    wrong = {1, 6, 11}
    for j in wrong:
        results[j] = field.add(results[j], rng.field_elements(P, results[j].shape))
    decoded = code.decode(results, degree=2)
    assert set(decoded.rejected) == wrong
    expected = _true(data) + np.sum(np.vstack(list(noise.values())), axis=0)
    assert np.array_equal(field.centered(decoded.values[0]), expected)


def _sum_pmf(sigma2: Fraction, shares: int, half_width: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact pmf of the sum of ``shares`` independent N_Z(0, sigma2) on [-W, W]."""
    s2 = float(sigma2)
    span = int(12 * math.sqrt(s2)) + 2
    x = np.arange(-span, span + 1)
    one = np.exp(-(x * x) / (2 * s2))
    one /= one.sum()
    pmf = one
    for _ in range(shares - 1):
        pmf = np.convolve(pmf, one)
    support = np.arange(-(len(pmf) // 2), len(pmf) // 2 + 1)
    keep = np.abs(support) <= half_width
    return support[keep], pmf[keep]


def test_decoded_noise_is_a_sum_of_discrete_gaussians() -> None:
    """Chi-square of the decoded noise against the exact convolution of ``n`` discrete
    Gaussian pmfs, and its variance against ``n Var[N_Z(0, sigma^2)]``: three contributors,
    4,000 slots of zero data, through contribution, recipients' sums and decoding."""
    field = PrimeField(P)
    code = LagrangeCode(field, k=1, t=1, n=4)
    contributors = (0, 1, 2)
    mech = DistanceNoise(
        noise_multiplier=0.06,
        l2_clip=0.5,
        bits=0,
        reduced_dim=1,
        min_reference=3,
        min_contributors=3,
    )  # R = 1, unit = 27, sigma^2 = (0.06 * 27)^2 / 3 (about 0.87)
    length = 4000
    rng = DeterministicRandom(b"distribution")
    sharing = ZeroSharing(code)
    contributions = {
        i: sharing.contribute(length, rng, values=mech.share(length, rng=rng)) for i in contributors
    }
    zero = np.zeros(length, dtype=np.int64)
    results = {
        j: rerandomize(field, zero, {i: contributions[i][j] for i in contributors}, contributors)
        for j in range(code.n)
    }
    values = field.centered(code.decode(results, degree=2).values[0])  # zero data: the noise
    n = len(contributors)
    variance = n * discrete_gaussian_variance(mech.share_sigma2)
    # variance test: (N-1) s^2 / sigma^2 ~ chi2(N-1)
    stat = (values.size - 1) * values.var(ddof=1) / variance
    low, high = chi2.ppf([1e-4, 1 - 1e-4], values.size - 1)
    assert low < stat < high
    assert abs(values.mean()) < 5 * math.sqrt(variance / values.size)
    support, pmf = _sum_pmf(mech.share_sigma2, n, half_width=4)
    observed = np.array([(values == s).sum() for s in support], dtype=float)
    tail = values.size - observed.sum()
    expected = np.append(pmf, 1 - pmf.sum()) * values.size
    result = chisquare(np.append(observed, tail), expected)
    assert result.pvalue > 1e-4


def test_without_values_the_contribution_is_still_a_zero_sharing() -> None:
    field = PrimeField(P)
    code = LagrangeCode(field, k=1, t=2, n=12)
    data = _data(7)
    zero = {i: np.zeros(REFS.result_length, dtype=np.int64) for i in REFS.participants}
    results = _noisy_stage(code, data, zero, REFS, seed=8)
    assert np.array_equal(field.centered(code.decode(results, degree=2).values[0]), _true(data))


def test_contribute_refuses_values_of_the_wrong_shape() -> None:
    code = LagrangeCode(PrimeField(P), k=1, t=2, n=12)
    with pytest.raises(ParameterError, match="values"):
        ZeroSharing(code).contribute(4, DeterministicRandom(0), values=np.zeros(3, dtype=np.int64))
    with pytest.raises(ParameterError, match="values"):
        ZeroSharing(code).contribute(3, DeterministicRandom(0), values=np.zeros(3))


def _outputs(q: np.ndarray, refs: ReferenceSets) -> np.ndarray:
    """The integer output vector (exact, Python ints) of real-valued integer vectors."""
    field = PrimeField(P)
    data = {i: np.mod(q[i].astype(np.int64), P) for i in refs.participants}
    return field.centered(coded_distances(field, data, refs, centre_pairs=False)).astype(float)


@pytest.mark.parametrize("seed", range(6))
def test_sensitivity_bound_holds_against_brute_force(seed: int) -> None:
    """Zeroing any participant's vector (|q| <= R) changes the outputs by at most the bound;
    vectors at the radius, aligned and anti-aligned (the worst cases), and random."""
    gen = np.random.default_rng(seed)
    refs = REFS
    n, r, radius = len(refs.participants), 3, 20.0
    bound = distance_sensitivity(refs, radius)
    worst = 0.0
    for trial in range(60):
        if trial % 3 == 0:  # aligned: group 0 on +u, others on -u (large distances)
            u = gen.normal(size=r)
            u /= np.linalg.norm(u)
            q = np.array([(1 if i < 3 else -1) * u * radius for i in range(n)])
        else:
            q = gen.normal(size=(n, r))
            q *= radius / np.linalg.norm(q, axis=1, keepdims=True) * gen.uniform(0.5, 1, (n, 1))
        q = np.trunc(q)  # integers, still inside the radius
        base = _outputs(q, refs)
        for a in range(n):
            moved = q.copy()
            moved[a] = 0
            worst = max(worst, float(np.linalg.norm(_outputs(moved, refs) - base)))
    assert 0 < worst <= bound
    assert worst > bound / 20  # the bound is not vacuous


def _params(n: int = 8) -> CryptoParams:
    return CryptoParams.for_federation(n, reduced_dim=16)


def test_for_params_lowers_bits_only_as_far_as_needed() -> None:
    params = _params()
    bits = distance_noise_bits(params, noise_multiplier=1.0, l2_clip=1.0)
    assert bits <= params.clustering_field.bits
    fitted = with_distance_noise_headroom(params, noise_multiplier=1.0, l2_clip=1.0)
    assert fitted.clustering_field.bits == bits
    DistanceNoise.for_params(fitted, noise_multiplier=1.0, l2_clip=1.0)
    higher = fitted.clustering_field.bits + 1
    too_fine = dataclasses.replace(
        fitted, clustering_field=dataclasses.replace(fitted.clustering_field, bits=higher)
    )
    with pytest.raises(ParameterError, match=f"largest safe value is {bits}|distance_noise"):
        DistanceNoise.for_params(too_fine, noise_multiplier=1.0, l2_clip=1.0)


def test_distance_noise_refuses_bad_parameters_by_name() -> None:
    good = dict(
        noise_multiplier=1.0,
        l2_clip=1.0,
        bits=4,
        reduced_dim=4,
        min_reference=3,
        min_contributors=3,
    )
    for name, bad in (
        ("noise_multiplier", 0.0),
        ("noise_multiplier", float("nan")),
        ("l2_clip", -1.0),
        ("bits", -1),
        ("reduced_dim", 0),
        ("min_contributors", True),
    ):
        with pytest.raises(ParameterError, match=name):
            DistanceNoise(**{**good, name: bad})  # type: ignore[arg-type]
    with pytest.raises(ParameterError, match=r"dp\.distance_noise_multiplier.*2\*\*40"):
        DistanceNoise(**{**good, "bits": 30})  # type: ignore[arg-type]


def test_the_ledger_records_the_distance_stage() -> None:
    mech = DistanceNoise.for_params(
        with_distance_noise_headroom(_params(), noise_multiplier=2.0, l2_clip=1.0),
        noise_multiplier=2.0,
        l2_clip=1.0,
    )
    record = mech.record(federation_id="f", round=3, refs=REFS)
    assert record.kind == "distance"
    assert record.mechanism == "distributed_discrete_gaussian"
    assert record.participants == REFS.participants
    assert record.shares == 3
    assert record.dimension == REFS.result_length
    assert record.sensitivity == pytest.approx(mech.sensitivity(REFS))
    assert record.rho == pytest.approx(mech.rho(REFS))
    # rho is the continuous Gaussian's Delta^2 / (2 n sigma^2) at these sigmas
    expected = record.sensitivity**2 / (2 * 3 * record.sigma**2)
    assert record.rho == pytest.approx(expected, rel=1e-9)
    assert LedgerRecord.from_dict(record.to_dict()) == record
    aggregation = LedgerRecord(
        federation_id="f",
        round=3,
        kind="distributed",
        participants=(0, 1, 2),
        sigma=1e4,
        sensitivity=1e4,
        cluster_id=0,
        mechanism="distributed_discrete_gaussian",
        shares=3,
        dimension=10,
    )
    alone = epsilon_spent([aggregation], delta=1e-5, participant=0, method="rdp")
    both = epsilon_spent([aggregation, record], delta=1e-5, participant=0, method="rdp")
    assert both > alone > 0
    by_kind = epsilon_by_participant([aggregation, record], delta=1e-5, kinds={"distance"})
    assert set(by_kind) == set(REFS.participants)  # every present participant is covered


def test_more_noise_less_epsilon_and_larger_sets_cost_more() -> None:
    params = with_distance_noise_headroom(_params(), noise_multiplier=4.0, l2_clip=1.0)
    low = DistanceNoise.for_params(params, noise_multiplier=1.0, l2_clip=1.0)
    high = DistanceNoise.for_params(params, noise_multiplier=4.0, l2_clip=1.0)
    assert high.rho(REFS) < low.rho(REFS)
    bigger = ReferenceSets(
        participants=tuple(range(8)),
        clusters=((0, (0, 1, 2, 3)), (1, (4, 5, 6, 7))),
        probes=((1, (4, 5, 6)),),
    )
    assert low.rho(bigger) > low.rho(REFS)


def test_with_noise_no_centre_pair_is_released_and_e_is_derived_from_d() -> None:
    """``centre_pairs=False`` zeroes the centre-centre slots; the noisy decode derives
    ``E`` from ``D``, exactly what the released pairs would have said (no noise here)."""
    field = PrimeField(P)
    spec = FieldSpec(P, 8, 4.0)
    code = LagrangeCode(field, k=1, t=2, n=12)
    gen = np.random.default_rng(9)
    x = {i: gen.normal(size=5) for i in REFS.participants}
    data = {i: quantize(x[i], field, bits=spec.bits, clip=spec.clip) for i in REFS.participants}
    rng = DeterministicRandom(b"pairs")
    shares = {i: code.share(data[i], rng) for i in REFS.participants}
    plain = {j: coded_distances(field, {i: shares[i][j] for i in shares}, REFS) for j in range(12)}
    quiet = {
        j: coded_distances(field, {i: shares[i][j] for i in shares}, REFS, centre_pairs=False)
        for j in range(12)
    }
    n_point = len(REFS.participants) * len(REFS.sets)
    assert all(not quiet[j][n_point:].any() for j in quiet)
    assert all(np.array_equal(quiet[j][:n_point], plain[j][:n_point]) for j in quiet)
    exact, _ = decode_distances(code, plain, REFS, spec)
    derived, _ = decode_distances(code, quiet, REFS, spec, noisy=True)
    assert np.array_equal(derived.point, exact.point)
    assert np.allclose(derived.centre, exact.centre, rtol=1e-9, atol=1e-9)
    assert exact.centre[0, 1] > 0
