"""PrimeField against galois (the reference) and exact Python integers."""

from __future__ import annotations

import galois
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfpp.crypto.errors import ParameterError
from secfpp.crypto.field import PrimeField, is_prime

PRIMES = [3, 257, 65537, 1_000_003, 2**31 - 1, 2**32 + 15, 2**61 - 1]
# galois's pure-Python arithmetic (exact Python integers) as the oracle: its default for the
# smaller primes JIT-compiles each field's ufuncs with numba first, about 2 s of CPU per
# prime and most of this module's time.
ORACLE = "python-calculate"


@st.composite
def field_and_arrays(draw: st.DrawFn) -> tuple[int, np.ndarray, np.ndarray]:
    p = draw(st.sampled_from(PRIMES))
    n = draw(st.integers(1, 20))
    values = st.integers(0, p - 1)
    a = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.int64)
    b = np.array(draw(st.lists(values, min_size=n, max_size=n)), dtype=np.int64)
    return p, a, b


@pytest.mark.slow  # over 7 s: left out of the inner loop (bash dev.sh quick)
@given(field_and_arrays())
def test_elementwise_matches_galois(case: tuple[int, np.ndarray, np.ndarray]) -> None:
    p, a, b = case
    F, GF = PrimeField(p), galois.GF(p, compile=ORACLE)
    assert F.add(a, b).tolist() == [int(v) for v in GF(a.tolist()) + GF(b.tolist())]
    assert F.sub(a, b).tolist() == [int(v) for v in GF(a.tolist()) - GF(b.tolist())]
    assert F.mul(a, b).tolist() == [int(v) for v in GF(a.tolist()) * GF(b.tolist())]
    assert F.neg(a).tolist() == [int(v) for v in -GF(a.tolist())]
    assert int(F.sum(a)) == sum(a.tolist()) % p
    assert int(F.square_sum(a)) == sum(v * v for v in a.tolist()) % p


@given(
    st.sampled_from(PRIMES),
    st.integers(1, 6),
    st.integers(1, 300),
    st.integers(1, 9),
    st.integers(0, 2**32),
)
def test_matmul_exact(p: int, n: int, k: int, cols: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.integers(0, p, (n, k))
    b = rng.integers(0, p, (k, cols))
    expected = (a.astype(object) @ b.astype(object)) % p
    assert PrimeField(p).matmul(a, b).tolist() == expected.tolist()


@pytest.mark.parametrize("p", [2**31 - 1, 2_147_483_629, 65537])
def test_matmul_extreme_values_and_many_blocks(p: int) -> None:
    F = PrimeField(p)
    for fill_a, fill_b in [(p - 1, p - 1), ((p - 1) // 2, (p + 1) // 2), (1, p - 1)]:
        a = np.full((3, 700), fill_a, dtype=np.int64)
        b = np.full((700, 5), fill_b, dtype=np.int64)
        expected = (a.astype(object) @ b.astype(object)) % p
        assert F.matmul(a, b).tolist() == expected.tolist()
        prepared = F.prepare_left(a)
        assert F.matmul(prepared, b).tolist() == expected.tolist()


def test_matmul_wide_tiles() -> None:
    # More columns than one tile: the tiling must cover every column once.
    F = PrimeField(2**31 - 1)
    rng = np.random.default_rng(1)
    a = rng.integers(0, F.prime, (4, 10))
    b = rng.integers(0, F.prime, (10, 20000))
    expected = (a.astype(object) @ b.astype(object)) % F.prime
    assert np.array_equal(F.matmul(a, b), expected.astype(np.int64))


def test_matmul_galois_small() -> None:
    GF = galois.GF(2**31 - 1, compile=ORACLE)
    rng = np.random.default_rng(2)
    a = rng.integers(0, GF.order, (5, 8))
    b = rng.integers(0, GF.order, (8, 6))
    assert PrimeField(GF.order).matmul(a, b).tolist() == (GF(a) @ GF(b)).tolist()


def test_prime_validation() -> None:
    assert [n for n in range(60) if is_prime(n)] == [n for n in range(60) if galois.is_prime(n)]
    assert is_prime(2**61 - 1)
    assert not is_prime(2**61 + 1)
    with pytest.raises(ParameterError, match="'prime' must be prime"):
        PrimeField(2**31)
    with pytest.raises(ParameterError, match="'prime'"):
        PrimeField(2**62 + 135)


def test_check_rejects_out_of_range() -> None:
    F = PrimeField(65537)
    with pytest.raises(ParameterError, match=r"\[0, 65537\)"):
        F.check(np.array([0, 65537]))
    with pytest.raises(ParameterError):
        F.check(np.array([-1]))


def test_centered_and_inverse() -> None:
    F = PrimeField(65537)
    assert F.centered(np.array([0, 32768, 32769, 65536])).tolist() == [0, 32768, -32768, -1]
    assert F.inv(3) * 3 % 65537 == 1
    with pytest.raises(ZeroDivisionError):
        F.inv(65537)
