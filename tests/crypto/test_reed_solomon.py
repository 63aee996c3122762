"""Reed-Solomon error location and the vectorized field algebra under it.

References are independent: exact Python integers (``object`` arrays, ``pow``) and
galois (``berlekamp_massey``, ``lagrange_poly``) as oracles; codewords are evaluations of
polynomials drawn at random, corrupted at random rows.
"""

from __future__ import annotations

import galois
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secfpp.crypto.errors import DecodeError, ParameterError
from secfpp.crypto.field import PrimeField
from secfpp.crypto.linalg import (
    MERSENNE_61,
    barycentric_weights,
    inverses,
    lagrange_matrix,
    matmul,
    mul,
    mulsum,
    times_pow2,
)
from secfpp.crypto.reed_solomon import ReedSolomonCode, berlekamp_massey
from secfpp.crypto.rng import DeterministicRandom

P31 = 2**31 - 1
P62 = 4611686018427387847  # the largest prime below 2**62: wide, not Mersenne
PRIMES = [65537, P31, MERSENNE_61, P62]


def _exact_matmul(a: np.ndarray, b: np.ndarray, p: int) -> list[list[int]]:
    return ((a.astype(object) @ b.astype(object)) % p).tolist()


# --- element-wise arithmetic ----------------------------------------------------------------
@given(st.sampled_from(PRIMES), st.data())
# more examples than the profile (cheap): the edge values 0, 1, p-2, p-1 must meet every prime
@settings(max_examples=80)
def test_mul_matches_python_integers(p: int, data: st.DataObject) -> None:
    values = st.one_of(st.integers(0, p - 1), st.sampled_from([0, 1, 2, p - 2, p - 1]))
    a = data.draw(st.lists(values, min_size=1, max_size=40))
    b = data.draw(st.lists(values, min_size=len(a), max_size=len(a)))
    got = mul(np.array(a, dtype=np.int64), np.array(b, dtype=np.int64), p)
    assert got.dtype == np.int64
    assert got.tolist() == [x * y % p for x, y in zip(a, b, strict=True)]
    bits = data.draw(st.integers(0, 130))
    assert times_pow2(np.array(a, dtype=np.int64), bits, p).tolist() == [
        x * pow(2, bits, p) % p for x in a
    ]
    assert (
        int(mulsum(np.array(a), np.array(b), p))
        == sum(x * y for x, y in zip(a, b, strict=True)) % p
    )


@pytest.mark.parametrize("p", PRIMES)
def test_inverses_both_paths(p: int) -> None:
    rng = DeterministicRandom(3)
    small = np.mod(np.arange(-300, 301), p)
    small = small[small != 0].reshape(20, 30)  # table path: |v| <= 300
    large = rng.field_elements(p, (4, 7))  # distinct-value path
    large[large == 0] = 1
    for values in (small, large):
        got = inverses(values, p)
        assert got.shape == values.shape
        assert got.tolist() == [[pow(int(v), p - 2, p) for v in row] for row in values]
    with pytest.raises(ZeroDivisionError):
        inverses(np.array([3, 0]), p)


# --- matrix products ------------------------------------------------------------------------
@pytest.mark.parametrize("p", PRIMES)
@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 5, 70), (2, 1400, 3), (40, 20, 300)])
def test_matmul_is_exact(p: int, shape: tuple[int, int, int]) -> None:
    m, k, cols = shape
    rng = DeterministicRandom(m * 1000 + k)
    a, b = rng.field_elements(p, (m, k)), rng.field_elements(p, (k, cols))
    expected = _exact_matmul(a, b, p)
    assert matmul(PrimeField(p), a, b).tolist() == expected
    # b as a transposed view takes the other memory layout
    assert matmul(PrimeField(p), a, np.ascontiguousarray(b.T).T).tolist() == expected


@pytest.mark.parametrize("p", PRIMES)
def test_matmul_worst_case_magnitudes(p: int) -> None:
    # Extreme entries (largest centred magnitudes, all-ones limbs) and an inner dimension
    # longer than two exact float64 blocks (1365 rows): a lost bit in the sums would show.
    k = 2 * 1365 + 7
    rng = DeterministicRandom(p)
    ones = [(1 << b) - 1 for b in (11, 21, 22, 31, 33, 42, 43, 61) if (1 << b) - 1 < p]
    extremes = np.array([(p - 1) // 2, (p + 1) // 2, p - 1, 1, *ones], dtype=np.int64)
    a = extremes[rng.field_elements(len(extremes), (3, k))]
    b = extremes[rng.field_elements(len(extremes), (k, 4))]
    assert matmul(PrimeField(p), a, b).tolist() == _exact_matmul(a, b, p)
    same = np.full((2, k), (p - 1) // 2, dtype=np.int64)
    assert matmul(PrimeField(p), same, same.T.copy()).tolist() == _exact_matmul(same, same.T, p)


def test_matmul_narrow_sums_at_the_float64_limit() -> None:
    # Left entries v with v, v * 2**11 and v * 2**22 mod p all above 0.93 * 2**30 (centred)
    # and right entries near p - 1 (11-bit limbs near their maximum): every term of the
    # limb GEMM is about 2**41 with one sign. Blocks of 1365 inner rows stay below 2**53;
    # summing all 10921 rows at once would round (checked with a larger block).
    p = P31
    grid = np.arange(1, p, 997, dtype=np.int64)

    def centred(x: np.ndarray) -> np.ndarray:
        return np.where(x > (p - 1) // 2, x - p, x)

    big = np.ones(grid.shape, dtype=bool)
    for shift in (0, 11, 22):
        big &= centred(grid * pow(2, shift, p) % p) > 0.93 * 2**30
    assert big.sum() > 20
    rng = DeterministicRandom(17)
    k = 8 * 1365 + 1
    a = grid[big][rng.field_elements(int(big.sum()), (3, k))]
    b = p - 1 - rng.field_elements(16, (k, 4))
    assert matmul(PrimeField(p), a, b).tolist() == _exact_matmul(a, b, p)


def test_matmul_rejects_bad_shapes() -> None:
    with pytest.raises(ValueError, match="'b'"):
        matmul(PrimeField(P31), np.zeros((2, 3), dtype=np.int64), np.zeros((4, 1), dtype=np.int64))


# --- Lagrange matrices ----------------------------------------------------------------------
def _lagrange_reference(nodes: list[int], z: int, k: int, p: int) -> int:
    value = 1
    for m, x in enumerate(nodes):
        if m != k:
            value = value * (z - x) * pow(nodes[k] - x, p - 2, p) % p
    return value


@pytest.mark.parametrize("p", PRIMES)
def test_lagrange_matrix_matches_product_formula(p: int) -> None:
    rng = DeterministicRandom(p)
    for nodes in ([3, 4, 5, 6, 7, 8], [int(v) for v in rng.field_elements(p, 9)]):
        points = [1, 2, nodes[2], int(rng.field_elements(p, 1)[0])]
        got = lagrange_matrix(nodes, points, p)
        assert got.tolist() == [
            [_lagrange_reference(nodes, z, k, p) for k in range(len(nodes))] for z in points
        ]
        assert got[2].tolist() == [1 if m == 2 else 0 for m in range(len(nodes))]
    with pytest.raises(ValueError, match="distinct"):
        lagrange_matrix([1, 2, 1], [5], p)


def test_lagrange_matrix_matches_galois() -> None:
    gf = galois.GF(MERSENNE_61)  # pure-Python field in galois: no JIT compile
    nodes = [int(v) for v in DeterministicRandom(5).field_elements(MERSENNE_61, 7)]
    points = [0, 1, 2**60 + 3]
    got = lagrange_matrix(nodes, points, MERSENNE_61)
    for k in range(len(nodes)):
        unit = [1 if m == k else 0 for m in range(len(nodes))]
        basis = galois.lagrange_poly(gf(nodes), gf(unit))
        assert got[:, k].tolist() == [int(v) for v in basis(gf(points))]


@pytest.mark.parametrize("p", [65537, MERSENNE_61])
def test_barycentric_weights_annihilate_low_degree(p: int) -> None:
    rng = DeterministicRandom(11)
    nodes = rng.field_elements(p, 12)
    w = barycentric_weights(nodes, p)
    for degree in range(11):  # sum_k w_k g(x_k) = 0 for deg g <= n - 2
        g = [pow(int(x), degree, p) for x in nodes]
        assert sum(int(a) * b for a, b in zip(w, g, strict=True)) % p == 0
    top = [pow(int(x), 11, p) for x in nodes]
    assert sum(int(a) * b for a, b in zip(w, top, strict=True)) % p == 1


@pytest.mark.parametrize("p", [65537, MERSENNE_61, P62])
def test_barycentric_weights_window_and_general_paths(p: int) -> None:
    window = [5, 6, 8, 9, 10, 12, 13, 14]  # fills most of [5, 14]: factorials, 2 missing
    scattered = [5, 6, 8, 9, 10, 12, 13, 40]  # too sparse: the n x n product
    for nodes in (window, scattered):
        expected = []
        for x in nodes:
            denominator = 1
            for y in nodes:
                if y != x:
                    denominator = denominator * (x - y) % p
            expected.append(pow(denominator, p - 2, p))
        assert barycentric_weights(nodes, p).tolist() == expected
    for repeated in ([5, 6, 6, 7], [5, 6, 6, 70]):
        with pytest.raises(ValueError, match="distinct"):
            barycentric_weights(repeated, p)


# --- Berlekamp-Massey -----------------------------------------------------------------------
def test_berlekamp_massey_known_answers() -> None:
    assert berlekamp_massey([1, 1, 2, 3, 5, 8], 101) == [1, 100, 100]  # Fibonacci
    assert berlekamp_massey([0, 0, 0, 0], 101) == [1]
    assert berlekamp_massey([0, 0, 0, 5], 101) == [1, 0, 0, 0, 96]  # complexity 4
    assert berlekamp_massey([2, 6, 18, 54], 101) == [1, 98]  # s_k = 3 s_{k-1}


@given(st.integers(1, 6), st.integers(0, 2**32))
def test_berlekamp_massey_matches_galois(order: int, seed: int) -> None:
    # GF(2**61 - 1) is a pure-Python field in galois (no JIT compile), an independent oracle.
    p = MERSENNE_61
    rng = DeterministicRandom(seed)
    taps = [int(v) for v in rng.field_elements(p, order)]
    seq = [int(v) for v in rng.field_elements(p, order)]
    while len(seq) < 2 * order + 3:
        seq.append(sum(c * s for c, s in zip(taps, reversed(seq[-order:]), strict=True)) % p)
    conn = berlekamp_massey(seq, p)
    for k in range(len(conn) - 1, len(seq)):
        assert sum(conn[i] * seq[k - i] for i in range(len(conn))) % p == 0
    expected = galois.berlekamp_massey(galois.GF(p)(seq), output="connection")
    trimmed = list(conn)
    while len(trimmed) > 1 and trimmed[-1] == 0:
        trimmed.pop()
    assert trimmed[::-1] == [int(c) for c in expected.coeffs]


@given(st.sampled_from([65537, P31]), st.integers(1, 8), st.integers(0, 2**32))
def test_berlekamp_massey_finds_the_generating_recurrence(p: int, order: int, seed: int) -> None:
    # 2 * order terms of a sum of `order` geometric sequences determine its recurrence,
    # whose connection polynomial is prod (1 - r_i z).
    rng = DeterministicRandom(seed)
    ratios = sorted({int(v) for v in rng.field_elements(p - 1, order) + 1})
    weights = [int(v) + 1 for v in rng.field_elements(p - 1, len(ratios))]
    seq = [
        sum(w * pow(r, k, p) for w, r in zip(weights, ratios, strict=True)) % p
        for k in range(2 * len(ratios))
    ]
    expected = [1]
    for r in ratios:
        expected = [
            ((expected[i] if i < len(expected) else 0) - r * (expected[i - 1] if i else 0)) % p
            for i in range(len(expected) + 1)
        ]
    assert berlekamp_massey(seq, p) == expected


# --- decoding with errors -------------------------------------------------------------------
def _codeword(
    p: int, points: list[int], dimension: int, cols: int, rng: DeterministicRandom
) -> tuple[np.ndarray, list[list[int]]]:
    coeffs = [[int(c) for c in row] for row in rng.field_elements(p, (cols, dimension))]
    words = np.array(
        [[sum(c * pow(x, e, p) for e, c in enumerate(col)) % p for col in coeffs] for x in points],
        dtype=np.int64,
    )
    return words, coeffs


def _corrupt(words: np.ndarray, rows: list[int], p: int, rng: DeterministicRandom) -> np.ndarray:
    bad = words.copy()
    for r in rows:
        noise = rng.field_elements(p, words.shape[1])
        keep = rng.uniform(words.shape[1]) < 0.5  # most errors touch only some columns
        noise[keep] = 0
        column = int(rng.uniform(1)[0] * words.shape[1])
        noise[column] = 1 + int(rng.field_elements(p - 1, 1)[0])  # at least one entry changes
        bad[r] = (bad[r] + noise) % p
    return bad


@st.composite
def codes(draw: st.DrawFn, primes: list[int]) -> tuple[ReedSolomonCode, DeterministicRandom]:
    p = draw(st.sampled_from(primes))
    n = draw(st.integers(1, 24))
    dimension = draw(st.integers(1, n))
    rng = DeterministicRandom(draw(st.integers(0, 2**32)))
    if draw(st.booleans()):
        start = draw(st.integers(0, 3))  # consecutive, possibly containing 0 (shifted)
        points = list(range(start, start + n))
    else:
        points = sorted({int(v) for v in rng.field_elements(p, 3 * n)})[:n]
        if len(points) < n:
            points = list(range(n))
    return ReedSolomonCode(PrimeField(p), tuple(points), dimension), rng


# A wrong row is hidden from the locator with probability 1/p (then decoding fails, see
# test_an_error_hidden_by_the_combination_is_still_refused), so the property tests use
# p >= 2**31, where that is about 1e-8 per example.
@given(codes([P31, MERSENNE_61]), st.integers(1, 5), st.data())
# more examples than the profile (cheap): error patterns up to the bound are many
@settings(max_examples=150)
def test_corrects_every_error_pattern_within_the_bound(
    case: tuple[ReedSolomonCode, DeterministicRandom], cols: int, data: st.DataObject
) -> None:
    code, rng = case
    p = code.field.prime
    words, coeffs = _codeword(p, list(code.points), code.dimension, cols, rng)
    errors = data.draw(st.integers(0, code.max_errors))
    rows = sorted(data.draw(st.permutations(range(len(code.points))))[:errors])
    received = _corrupt(words, rows, p, rng)
    targets = [0, 7, int(rng.field_elements(p, 1)[0])]
    values, found = code.decode(received, targets, rng)
    assert list(found) == rows
    assert values.tolist() == [
        [sum(c * pow(z, e, p) for e, c in enumerate(col)) % p for col in coeffs] for z in targets
    ]
    assert code.locate(words[:, 0]) == ()


@given(codes([P31, MERSENNE_61]), st.integers(1, 4), st.data())
# more examples than the profile (cheap): error patterns up to the bound are many
@settings(max_examples=150)
def test_beyond_the_bound_raises_never_decodes_silently(
    case: tuple[ReedSolomonCode, DeterministicRandom], cols: int, data: st.DataObject
) -> None:
    # Random errors at more than floor((n-R)/2) rows land within that distance of another
    # codeword with probability about n**2 / p, negligible for these primes.
    code, rng = case
    n, p = len(code.points), code.field.prime
    if code.redundancy == 0:
        return
    words, _ = _codeword(p, list(code.points), code.dimension, cols, rng)
    errors = data.draw(st.integers(code.max_errors + 1, code.redundancy))
    rows = sorted(data.draw(st.permutations(range(n)))[:errors])
    received = _corrupt(words, rows, p, rng)
    labels = [100 + i for i in range(n)]
    with pytest.raises(DecodeError) as info:
        code.decode(received, [0], rng, labels=labels)
    assert info.value.received == tuple(labels)


def test_syndromes_are_moments_of_the_error_pattern() -> None:
    # S_k = sum_{i in E} v_i e_i x_i**k; 140 syndromes span three blocks of powers.
    p = MERSENNE_61
    code = ReedSolomonCode(PrimeField(p), tuple(range(3, 153)), 10)
    words, _ = _codeword(p, list(code.points), 10, 1, DeterministicRandom(4))
    assert code.syndromes(words[:, 0]).tolist() == [0] * 140
    errors = {4: 17, 11: p - 3, 149: 2**40}
    received = words[:, 0].copy()
    for i, e in errors.items():
        received[i] = (received[i] + e) % p
    v = barycentric_weights(list(code.points), p)
    expected = [
        sum(int(v[i]) * e * pow(code.points[i], k, p) for i, e in errors.items()) % p
        for k in range(140)
    ]
    assert code.syndromes(received).tolist() == expected
    assert code.locate(received) == (4, 11, 149)


def test_known_answer_small_field() -> None:
    # f(x) = 2 + 3x + x^2 over GF(97) at x = 1..7 is [6, 12, 20, 30, 42, 56, 72];
    # rows 1 and 4 are wrong. n - R = 4, so both are corrected.
    code = ReedSolomonCode(PrimeField(97), tuple(range(1, 8)), 3)
    received = np.array([[6], [13], [20], [30], [0], [56], [72]], dtype=np.int64)
    values, errors = code.decode(received, [0, 8], DeterministicRandom(0))
    assert errors == (1, 4)
    assert values.tolist() == [[2], [(2 + 24 + 64) % 97]]
    assert code.locate(received[:, 0]) == (1, 4)
    three = received.copy()
    three[6] = 1
    assert code.locate(three[:, 0]) is None


class _FixedCoefficients:
    """A RandomSource stand-in whose first draw (the column combination that errors are
    located on) is chosen by the test; later draws (the consistency check's) are seeded."""

    def __init__(self, coeffs: list[int]) -> None:
        self.coeffs: list[int] | None = coeffs
        self.rest = DeterministicRandom("check")

    def field_elements(self, prime: int, shape: int | tuple[int, ...]) -> np.ndarray:
        if self.coeffs is None:
            return self.rest.field_elements(prime, shape)
        coeffs, self.coeffs = self.coeffs, None
        return np.array(coeffs, dtype=np.int64).reshape(shape)


def test_an_error_hidden_by_the_combination_is_still_refused() -> None:
    # Row 2 is wrong by (+1, -1): the combination (1, 1) cancels it; row 5 is wrong in
    # column 0 only and is located. Row 2 must then fail the random-combination check.
    p = 65537
    code = ReedSolomonCode(PrimeField(p), tuple(range(1, 11)), 4)
    words, _ = _codeword(p, list(code.points), 4, 2, DeterministicRandom(1))
    received = words.copy()
    received[2] = (received[2] + [1, p - 1]) % p
    received[5, 0] = (received[5, 0] + 9) % p
    with pytest.raises(DecodeError, match="inconsistent") as info:
        code.decode(received, [0], _FixedCoefficients([1, 1]))
    assert info.value.rejected == (5,)
    with pytest.raises(DecodeError, match="inconsistent") as info:
        code.decode(received, [0], _FixedCoefficients([0, 0]))
    assert info.value.rejected == ()


def test_no_redundancy_left_to_correct() -> None:
    code = ReedSolomonCode(PrimeField(97), (1, 2, 3, 4), 3)
    received = np.array([[1], [2], [3], [5]], dtype=np.int64)
    with pytest.raises(DecodeError, match="more than 0"):
        code.decode(received, [0], DeterministicRandom(0))
    exact = ReedSolomonCode(PrimeField(97), (1, 2, 3), 3)
    values, errors = exact.decode(received[:3], [0], DeterministicRandom(0))
    assert (values.tolist(), errors) == ([[0]], ())  # f(x) = x


def test_rejects_bad_parameters() -> None:
    with pytest.raises(ParameterError, match="'dimension'"):
        ReedSolomonCode(PrimeField(97), (1, 2), 3)
    with pytest.raises(ParameterError, match="'points'"):
        ReedSolomonCode(PrimeField(97), (1, 98), 1)
    code = ReedSolomonCode(PrimeField(97), (1, 2, 3), 2)
    with pytest.raises(ParameterError, match="'received'"):
        code.decode(np.zeros((2, 1), dtype=np.int64), [0], DeterministicRandom(0))
    with pytest.raises(ParameterError, match="'labels'"):
        code.decode(np.zeros((3, 1), dtype=np.int64), [0], DeterministicRandom(0), labels=[1])
