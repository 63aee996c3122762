"""Re-randomized distance stage: the decoded polynomial shows only its value (issue 26, item 3).

The oracle: for fixed data (so fixed distances), run the coded distance stage many times
with fresh randomness, interpolate the polynomial the coordinator decodes, and test its
evaluations away from the data point for uniformity (chi-square over a small field). On
the plain path (main's ``coded_distances``) the test rejects uniformity: with one
coordinate every decoded polynomial is a perfect square, so all its evaluations are
quadratic residues (:func:`test_oracle_rejects_the_plain_path`).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.stats import chisquare

from secfpp.crypto.errors import DecodeError, ParameterError
from secfpp.crypto.field import PrimeField
from secfpp.crypto.lcc import LagrangeCode
from secfpp.crypto.linalg import lagrange_matrix, matmul
from secfpp.crypto.params import FieldSpec
from secfpp.crypto.quantize import dequantize, quantize
from secfpp.crypto.rerandomize import ZeroSharing, output_bound, rerandomize, rerandomized_distances
from secfpp.crypto.rng import DeterministicRandom, RandomSource
from secfpp.crypto.secpc import (
    ReferenceSets,
    coded_distances,
    decode_distances,
    plaintext_distances,
)

SMALL = 103
"""A small prime: the oracle's chi-square has one bin per field element."""


def _interpolate(code: LagrangeCode, results: dict[int, np.ndarray], at: list[int]) -> np.ndarray:
    """The decoded polynomial's values at ``at``, from the first ``d + 1`` results,
    after checking every result lies on it (shape (len(at), m))."""
    degree = 2 * (code.k + code.t - 1)
    order = sorted(results)
    nodes = [code.alpha(j) for j in order[: degree + 1]]
    basis = np.vstack([results[j] for j in order[: degree + 1]])
    rest = [code.alpha(j) for j in order[degree + 1 :]]
    if rest:
        predicted = matmul(code.field, lagrange_matrix(nodes, rest, code.field.prime), basis)
        assert np.array_equal(predicted, np.vstack([results[j] for j in order[degree + 1 :]]))
    return matmul(code.field, lagrange_matrix(nodes, at, code.field.prime), basis)


def _stage(
    code: LagrangeCode,
    data: dict[int, np.ndarray],
    refs: ReferenceSets,
    rng: RandomSource,
    *,
    rerandomized: bool,
    bound: int | None = None,
) -> dict[int, np.ndarray]:
    """Every present participant shares (and contributes), every recipient computes."""
    shares = {i: code.share(data[i], rng) for i in refs.participants}
    zeros = ZeroSharing(code)
    length = bound if bound is not None else refs.result_length
    contributions = {i: zeros.contribute(length, rng) for i in refs.participants}
    results = {}
    for j in range(code.n):
        mine = {i: shares[i][j] for i in refs.participants}
        if rerandomized:
            received = {i: contributions[i][j] for i in refs.participants}
            results[j] = rerandomized_distances(code.field, mine, received, refs)
        else:
            results[j] = coded_distances(code.field, mine, refs)
    return results


def _oracle_samples(rerandomized: bool, runs: int = 2000) -> tuple[np.ndarray, np.ndarray]:
    """Decoded polynomials' values at the data point and at ``z = 0, 2, 3``: (runs, 4, m)."""
    field = PrimeField(SMALL)
    code = LagrangeCode(field, k=1, t=1, n=5)  # degree 2, threshold 3
    values = [1, 0, -1, 1, 0]  # r = 1; every squared distance below (p - 1) / 2
    data = {i: field.asarray([v % SMALL]) for i, v in enumerate(values)}
    refs = ReferenceSets(tuple(range(5)), ((0, (0, 1, 2)), (1, (3, 4))))
    rng = DeterministicRandom(b"oracle" + bytes([rerandomized]))
    samples = np.stack(
        [
            _interpolate(
                code, _stage(code, data, refs, rng, rerandomized=rerandomized), [1, 0, 2, 3]
            )
            for _ in range(runs)
        ]
    )
    expected = coded_distances(field, data, refs)  # with u = x constant: the true values
    return samples, expected


def _chi_square_pvalues(samples: np.ndarray) -> list[float]:
    """p-value of "uniform over GF(SMALL)" for each (point, output) of ``samples[:, 1:]``."""
    pvalues = []
    for point in range(1, samples.shape[1]):
        for output in range(samples.shape[2]):
            counts = np.bincount(samples[:, point, output], minlength=SMALL)
            pvalues.append(float(chisquare(counts).pvalue))
    return pvalues


def _residue_fraction(samples: np.ndarray) -> float:
    squares = {v * v % SMALL for v in range(SMALL)}
    return float(np.isin(samples[:, 1:, :], list(squares)).mean())


@pytest.mark.slow  # over 7 s: left out of the inner loop (bash dev.sh quick)
def test_decoded_polynomial_is_uniform_off_the_data_point() -> None:
    samples, expected = _oracle_samples(rerandomized=True)
    # The value at the data point is the true distance, every run.
    assert (samples[:, 0, :] == expected[None, :]).all()
    # Elsewhere each evaluation is uniform over GF(103): 33 chi-square tests of 2,000
    # samples (deterministic seed); the smallest p-value must not be extreme.
    assert min(_chi_square_pvalues(samples)) > 1e-4
    # Quadratic residues (and 0) are 52 of 103 elements: about half the values.
    assert abs(_residue_fraction(samples) - 52 / SMALL) < 0.02


@pytest.mark.slow  # over 1.5 s on the 2-core machine: out of the inner loop (bash dev.sh quick)
def test_oracle_rejects_the_plain_path() -> None:
    """The same oracle on main's path: every decoded polynomial is a perfect square."""
    samples, expected = _oracle_samples(rerandomized=False, runs=600)
    assert (samples[:, 0, :] == expected[None, :]).all()
    assert _residue_fraction(samples) == 1.0
    assert max(_chi_square_pvalues(samples)) < 1e-6


@pytest.mark.parametrize("k", [1, 2])
def test_zero_sharing_vanishes_at_the_data_points(k: int) -> None:
    field = PrimeField(2**61 - 1)
    code = LagrangeCode(field, k=k, t=2, n=11)
    zeros = ZeroSharing(code)
    assert zeros.poly_degree == 2 * (k + 1)
    values = zeros.contribute(6, DeterministicRandom(k))
    degree = zeros.poly_degree
    nodes = [code.alpha(j) for j in range(degree + 1)]
    at_data = matmul(
        field, lagrange_matrix(nodes, code.betas[:k], field.prime), values[: degree + 1]
    )
    assert not at_data.any()
    rest = matmul(
        field,
        lagrange_matrix(nodes, [code.alpha(j) for j in range(degree + 1, 11)], field.prime),
        values[: degree + 1],
    )
    assert np.array_equal(rest, values[degree + 1 :])  # all N values on one degree-d poly
    assert (values[: zeros.free] != 0).all()  # the drawn part is random, not zero


def test_zero_sharing_with_fewer_recipients_than_free_values() -> None:
    code = LagrangeCode(PrimeField(2**61 - 1), k=1, t=3, n=4)  # F = 6 > N = 4
    values = ZeroSharing(code).contribute(3, DeterministicRandom(0))
    assert values.shape == (4, 3)


def _params_code(n: int, t: int, recipients: int | None = None) -> tuple[LagrangeCode, FieldSpec]:
    spec = FieldSpec(2**61 - 1, 16, 4.0)
    return LagrangeCode(spec.field, k=1, t=t, n=recipients or n), spec


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[np.ndarray, ReferenceSets, int, int]:
    n = draw(st.integers(6, 10))
    r = draw(st.integers(1, 12))
    labels = draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    absent = set(draw(st.lists(st.integers(0, n - 1), max_size=2)))
    present = tuple(i for i in range(n) if i not in absent)
    clusters = tuple(
        (c, tuple(i for i in present if labels[i] == c))
        for c in (0, 1)
        if any(labels[i] == c for i in present)
    )
    probes = tuple((c, m[:1]) for c, m in clusters if len(m) > 1 and draw(st.booleans()))
    seed = draw(st.integers(0, 2**32))
    vectors = np.random.default_rng(seed).normal(0, 1, (n, r))
    return vectors, ReferenceSets(present, clusters, probes), n, seed


@given(scenarios())
# fewer examples than the profile: each shares, re-randomizes and decodes a whole distance stage
@settings(max_examples=30)
def test_rerandomized_decode_equals_plaintext_exactly(
    case: tuple[np.ndarray, ReferenceSets, int, int],
) -> None:
    """Same decoded field values as the plain path, whatever subset of recipients answers."""
    vectors, refs, n, seed = case
    code, spec = _params_code(n, t=2)
    rng = DeterministicRandom(seed)
    q = {
        i: quantize(vectors[i], code.field, bits=spec.bits, clip=spec.clip)
        for i in refs.participants
    }
    bound = output_bound(n, 2)
    assert refs.result_length <= bound
    plain = _stage(code, q, refs, rng, rerandomized=False)
    mixed = _stage(code, q, refs, rng, rerandomized=True, bound=bound)
    answering = list(range(n))[n - code.recovery_threshold(2) :]  # the first ones dropped out
    got, decoded = decode_distances(code, {j: mixed[j] for j in answering}, refs, spec)
    want, reference = decode_distances(code, plain, refs, spec)
    assert np.array_equal(decoded.values, reference.values)
    assert np.array_equal(got.point, want.point)
    assert np.array_equal(got.centre, want.centre)
    real = {i: dequantize(q[i], code.field, bits=spec.bits) for i in refs.participants}
    exact = plaintext_distances(real, refs)
    np.testing.assert_allclose(got.point, exact.point, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.centre, exact.centre, rtol=1e-9, atol=1e-12)
    assert not any(np.array_equal(mixed[j], plain[j]) for j in range(n))


def test_decode_corrects_wrong_rerandomized_results() -> None:
    n = 11
    code, spec = _params_code(n, t=2)  # threshold 5: corrects up to 3 of 11
    vectors = np.random.default_rng(3).normal(0, 1, (n, 8))
    refs = ReferenceSets(tuple(range(n)), ((0, tuple(range(6))), (1, tuple(range(6, n)))))
    q = {i: quantize(vectors[i], code.field, bits=spec.bits, clip=spec.clip) for i in range(n)}
    rng = DeterministicRandom(b"wrong")
    results = _stage(code, q, refs, rng, rerandomized=True)
    clean, _ = decode_distances(code, results, refs, spec)
    wrong = {1, 4, 9}
    for j in wrong:
        results[j] = code.field.add(results[j], np.full_like(results[j], 12345))
    got, decoded = decode_distances(code, results, refs, spec)
    assert set(decoded.rejected) == wrong
    assert np.array_equal(got.point, clean.point)
    assert np.array_equal(got.centre, clean.centre)
    real = {i: dequantize(q[i], code.field, bits=spec.bits) for i in range(n)}
    np.testing.assert_allclose(got.point, plaintext_distances(real, refs).point, rtol=1e-9)
    results[2] = code.field.add(results[2], np.full_like(results[2], 1))  # a fourth: too many
    with pytest.raises(DecodeError):
        decode_distances(code, results, refs, spec)


def test_a_recipient_with_another_contributor_set_is_corrected() -> None:
    """Contributions of a participant the request does not list must not be added: a
    recipient that adds them answers off the codeword and is named wrong."""
    n = 9
    code, spec = _params_code(n, t=2)
    vectors = np.random.default_rng(5).normal(0, 1, (n, 4))
    refs = ReferenceSets(tuple(range(1, n)), ((0, tuple(range(1, n))),))  # 0 dropped out
    q = {i: quantize(vectors[i], code.field, bits=spec.bits, clip=spec.clip) for i in range(n)}
    rng = DeterministicRandom(b"set")
    shares = {i: code.share(q[i], rng) for i in range(n)}
    contributions = {i: ZeroSharing(code).contribute(refs.result_length, rng) for i in range(n)}
    results = {}
    for j in range(n):
        mine = {i: shares[i][j] for i in refs.participants}
        received = {i: contributions[i][j] for i in range(n)}
        results[j] = rerandomized_distances(code.field, mine, received, refs)  # ignores 0
    stray = coded_distances(code.field, {i: shares[i][3] for i in refs.participants}, refs)
    results[3] = rerandomize(
        code.field, stray, {i: contributions[i][3] for i in range(n)}, range(n)
    )
    got, decoded = decode_distances(code, results, refs, spec)
    assert decoded.rejected == (3,)
    real = {i: dequantize(q[i], code.field, bits=spec.bits) for i in refs.participants}
    np.testing.assert_allclose(got.point, plaintext_distances(real, refs).point, rtol=1e-9)


def test_committee_members_compute_for_everyone() -> None:
    """A committee of 7 computes on 15 participants' shares; contributions go to members."""
    n, members = 15, 7
    code, spec = _params_code(n, t=2, recipients=members)
    vectors = np.random.default_rng(7).normal(0, 1, (n, 6))
    refs = ReferenceSets(
        tuple(range(n)), ((0, tuple(range(8))), (1, tuple(range(8, n)))), ((0, (0, 1, 2)),)
    )
    q = {i: quantize(vectors[i], code.field, bits=spec.bits, clip=spec.clip) for i in range(n)}
    results = _stage(code, q, refs, DeterministicRandom(b"committee"), rerandomized=True)
    del results[6], results[0]  # two members drop out: 5 = threshold remain
    got, _ = decode_distances(code, results, refs, spec)
    real = {i: dequantize(q[i], code.field, bits=spec.bits) for i in range(n)}
    exact = plaintext_distances(real, refs)
    np.testing.assert_allclose(got.point, exact.point, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.centre, exact.centre, rtol=1e-9, atol=1e-12)


def test_rerandomize_refuses_bad_contributions() -> None:
    field = PrimeField(2**61 - 1)
    coded = field.asarray([1, 2, 3])
    with pytest.raises(ParameterError, match=r"zero-sharings of \[2\]"):
        rerandomize(field, coded, {1: field.asarray([0, 0, 0])}, [1, 2])
    with pytest.raises(ParameterError, match=r"contributions\[1\]"):
        rerandomize(field, coded, {1: field.asarray([0, 0])}, [1])
    with pytest.raises(ParameterError, match=r"contributions\[1\]"):
        rerandomize(field, coded, {1: np.array([0, 0, 2**61 - 1])}, [1])
    out = rerandomize(field, coded, {1: field.asarray([2**61 - 2, 0, 5, 9])}, [1])
    assert out.tolist() == [0, 2, 8]
    with pytest.raises(ParameterError, match="max_clusters"):
        output_bound(10, 0)
    assert output_bound(100, 8) == 100 * 16 + 28


def _collusion_attack(rerandomized: bool) -> tuple[list[int], list[int]]:
    """Colluding recipients 0 and 1 (T = 2) with the coordinator, and participant 0, who
    shares the zero vector with zero masks. For ``S`` the honest cluster, ``X = sum_S x``,
    the decoded ``h(z) = |U_S(z)|**2``; over the Lagrange basis of ``{beta_1, alpha_0,
    alpha_1}``, ``U_S = X l_0 + sum_c U_S(alpha_c) l_c`` (the colluders received
    ``U_S(alpha_c)``), so ``h - |sum_c U_S(alpha_c) l_c|**2 - |X|**2 l_0**2`` equals
    ``2 l_0 sum_c l_c <X, U_S(alpha_c)>``: two evaluations give the inner products of the
    honest sum with two known vectors. Returns (recovered, true) inner products."""
    field = PrimeField(2**61 - 1)
    p = field.prime
    code = LagrangeCode(field, k=1, t=2, n=7)  # degree 4, threshold 5
    rng = DeterministicRandom(b"collusion" + bytes([rerandomized]))
    honest = (2, 3, 4, 5, 6)
    refs = ReferenceSets(tuple(range(7)), ((0, (0, 1)), (1, honest)))
    x = {i: field.asarray(np.random.default_rng(i).integers(0, 1000, 3)) for i in honest}
    shares = {i: code.share(x[i], rng) for i in honest}
    shares[0] = np.zeros((7, 3), dtype=np.int64)  # the colluding participant: u_0 = 0
    shares[1] = code.share(field.asarray([1, 2, 3]), rng)
    zeros = ZeroSharing(code)
    contributions = {i: zeros.contribute(refs.result_length, rng) for i in honest}
    contributions[0] = contributions[1] = np.zeros((7, refs.result_length), dtype=np.int64)
    results = {}
    for j in range(7):
        mine = {i: shares[i][j] for i in range(7)}
        received = {i: contributions[i][j] for i in range(7)}
        results[j] = (
            rerandomized_distances(field, mine, received, refs)
            if rerandomized
            else coded_distances(field, mine, refs)
        )
    output = 1  # delta(0, S = cluster 1): row 0, second set
    w = [20, 21]
    values = _interpolate(code, results, [1, *w])[:, output]
    norm_x = int(values[0])  # |X|**2: the legitimate output, since u_0(beta_1) = 0
    known = {c: field.sum(np.vstack([shares[i][c] for i in honest]), axis=0) for c in (0, 1)}
    basis = lagrange_matrix([1, code.alpha(0), code.alpha(1)], w, p)  # (2, 3)
    rows, rhs = [], []
    for n in range(len(w)):
        l0, l1, l2 = (int(v) for v in basis[n])
        k = [(int(known[0][i]) * l1 + int(known[1][i]) * l2) % p for i in range(3)]
        remainder = (int(values[n + 1]) - sum(v * v for v in k) - norm_x * l0 * l0) % p
        rows.append([2 * l0 * l1 % p, 2 * l0 * l2 % p])
        rhs.append(remainder)
    det = (rows[0][0] * rows[1][1] - rows[0][1] * rows[1][0]) % p
    inv = pow(det, p - 2, p)
    a0 = (rhs[0] * rows[1][1] - rows[0][1] * rhs[1]) * inv % p
    a1 = (rows[0][0] * rhs[1] - rhs[0] * rows[1][0]) * inv % p
    total = [sum(int(x[i][m]) for i in honest) % p for m in range(3)]
    truth = [sum(t * int(known[c][m]) for m, t in enumerate(total)) % p for c in (0, 1)]
    return [a0, a1], truth


def test_colluders_read_inner_products_of_an_honest_sum_on_the_plain_path() -> None:
    """The attack the re-randomization stops: exact on main's path."""
    recovered, truth = _collusion_attack(rerandomized=False)
    assert recovered == truth


def test_colluders_learn_nothing_from_the_rerandomized_polynomial() -> None:
    recovered, truth = _collusion_attack(rerandomized=True)
    assert recovered[0] != truth[0]
    assert recovered[1] != truth[1]


def test_known_limit_a_contributor_that_does_not_vanish_shifts_outputs_undetected() -> None:
    """docs/protocol.md section 9: a contribution is a polynomial of the right degree but
    not zero at the data point; the results stay a codeword, so nothing is rejected and
    every output moves by the contributor's chosen offset (integrity, not privacy)."""
    n = 9
    code, spec = _params_code(n, t=2)
    vectors = np.random.default_rng(13).normal(0, 1, (n, 4))
    refs = ReferenceSets(tuple(range(n)), ((0, tuple(range(n))),))
    q = {i: quantize(vectors[i], code.field, bits=spec.bits, clip=spec.clip) for i in range(n)}
    rng = DeterministicRandom(b"offset")
    shares = {i: code.share(q[i], rng) for i in range(n)}
    contributions = {i: ZeroSharing(code).contribute(refs.result_length, rng) for i in range(n)}
    offset = 7 * spec.scale**2 * n**2  # +7.0 on every squared point-centre distance
    contributions[4] = code.field.add(
        contributions[4], np.full_like(contributions[4], offset)
    )  # a constant polynomial: degree 0 <= d, value `offset` everywhere
    results = {
        j: rerandomized_distances(
            code.field,
            {i: shares[i][j] for i in range(n)},
            {i: contributions[i][j] for i in range(n)},
            refs,
        )
        for j in range(n)
    }
    got, decoded = decode_distances(code, results, refs, spec)
    assert decoded.rejected == ()
    real = {i: dequantize(q[i], code.field, bits=spec.bits) for i in range(n)}
    np.testing.assert_allclose(got.point, plaintext_distances(real, refs).point + 7.0, rtol=1e-9)
