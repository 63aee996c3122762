"""The fast exact field products against galois: random shapes, edge values, block edges.

:func:`crypto.field.narrow_product` (``p < 2**31``, reached through
:meth:`PrimeField.matmul`, prepared or not, and :func:`crypto.linalg.matmul`) and
:func:`crypto.linalg.matmul`'s wide paths (``p >= 2**31``) must equal ``GF(a) @ GF(b)``
for every shape, including matrices made only of ``0``, ``1``, ``(p-1)/2``, ``(p+1)/2``
and ``p - 1`` and inner dimensions one below, at and one above the exact-block
boundaries of the float64 sums (where a lost bit would first show).
"""

from __future__ import annotations

import itertools
from functools import cache

import galois
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secfpp.crypto.field import PrimeField, narrow_blocks
from secfpp.crypto.linalg import matmul

NARROW = [3, 257, 65537, 2_147_483_629, 2**31 - 1]
WIDE = [2**32 + 15, 2**61 - 1]
WIDE_BLOCK = 1365  # crypto.linalg._INNER_BLOCK: inner rows of one exact wide GEMM block


@cache
def _gf(p: int) -> type[galois.FieldArray]:
    # galois's pure-Python arithmetic (exact Python integers): its default for the narrow
    # primes JIT-compiles the field's ufuncs with numba first, about 2 s of CPU per prime
    return galois.GF(p, compile="python-calculate")


def _expected(a: np.ndarray, b: np.ndarray, p: int) -> list[list[int]]:
    gf = _gf(p)
    product: list[list[int]] = np.asarray(gf(a.tolist()) @ gf(b.tolist())).astype(object).tolist()
    return product


def _edges(p: int) -> list[int]:
    return sorted({0, 1, (p - 1) // 2, (p + 1) // 2, p - 2, p - 1})


def _narrow_boundary(p: int) -> int:
    """Length of the first exact block for the worst left rows (all ``(p-1)/2``).

    127 for ``p`` near ``2**31``; primes below ``2**20`` never reach a boundary within
    the probed 512 columns (their sums have ``2**20`` times more room), and give 512.
    """
    half = np.full((1, 512), (p - 1) // 2, dtype=np.int64)
    high = np.mod(half * (1 << 16), p)
    high = np.where(high > (p - 1) // 2, high - p, high)
    low = np.where(half > (p - 1) // 2, half - p, half)
    return narrow_blocks(high, low, p)[0][1]


@st.composite
def matrix(draw: st.DrawFn, p: int, rows: int, cols: int) -> np.ndarray:
    """Uniform, constant (an edge value) or mixed-edge entries."""
    kind = draw(st.sampled_from(["uniform", "constant", "edges"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return rng.integers(0, p, (rows, cols), dtype=np.int64)
    edges = np.array(_edges(p), dtype=np.int64)
    if kind == "constant":
        return np.full((rows, cols), draw(st.sampled_from(edges.tolist())), dtype=np.int64)
    return edges[rng.integers(0, len(edges), (rows, cols))]


@st.composite
def narrow_case(draw: st.DrawFn) -> tuple[int, np.ndarray, np.ndarray]:
    p = draw(st.sampled_from(NARROW))
    edge = _narrow_boundary(p)
    n = draw(st.integers(1, 5))
    edges = [edge - 1, edge, edge + 1, 2 * edge + 1] if edge < 512 else [1]
    k = draw(st.one_of(st.integers(1, 40), st.sampled_from(edges)))
    cols = draw(st.integers(1, 7))
    return p, draw(matrix(p, n, k)), draw(matrix(p, k, cols))


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
@given(narrow_case())
def test_narrow_products_match_galois(case: tuple[int, np.ndarray, np.ndarray]) -> None:
    p, a, b = case
    field = PrimeField(p)
    expected = _expected(a, b, p)
    assert field.matmul(a, b).tolist() == expected
    assert field.matmul(field.prepare_left(a), b).tolist() == expected
    assert matmul(field, a, b).tolist() == expected
    # the other memory layout of the right operand (a transposed view, as in decoding)
    assert matmul(field, a, np.ascontiguousarray(b.T).T).tolist() == expected


@st.composite
def wide_case(draw: st.DrawFn) -> tuple[int, np.ndarray, np.ndarray]:
    p = draw(st.sampled_from(WIDE))
    n = draw(st.integers(1, 4))
    k = draw(st.one_of(st.integers(1, 30), st.sampled_from([WIDE_BLOCK, WIDE_BLOCK + 1])))
    # few columns: the five-sum path; many (>= 2k): the three-output path
    cols = draw(st.one_of(st.integers(1, 6), st.integers(2 * k, 2 * k + 3)))
    if k > 30:  # at the block boundary: few columns (galois is slow on long sums)
        cols = min(cols, 6)
    return p, draw(matrix(p, n, k)), draw(matrix(p, k, cols))


@given(wide_case())
# fewer examples than the profile: each checks wide products against galois (slow) twice
@settings(max_examples=20)
def test_wide_products_match_galois(case: tuple[int, np.ndarray, np.ndarray]) -> None:
    p, a, b = case
    expected = _expected(a, b, p)
    field = PrimeField(p)
    assert matmul(field, a, b).tolist() == expected
    assert matmul(field, a, np.ascontiguousarray(b.T).T).tolist() == expected


@pytest.mark.parametrize("p", NARROW)
def test_narrow_all_extreme_matrices_across_blocks(p: int) -> None:
    # Every pair of constant edge matrices, inner dimension past two worst-case blocks.
    field = PrimeField(p)
    k = 2 * _narrow_boundary(p) + 3
    for x in _edges(p):
        for y in _edges(p):
            a = np.full((2, k), x, dtype=np.int64)
            b = np.full((k, 3), y, dtype=np.int64)
            assert field.matmul(a, b).tolist() == [[x * y * k % p] * 3] * 2


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
@pytest.mark.parametrize("p", WIDE)
def test_wide_all_extreme_matrices_across_blocks(p: int) -> None:
    field = PrimeField(p)
    k = WIDE_BLOCK + 2
    for x in _edges(p):
        for y in _edges(p):
            a = np.full((2, k), x, dtype=np.int64)
            for cols in (3, 2 * k):  # both wide paths
                b = np.full((k, cols), y, dtype=np.int64)
                assert matmul(field, a, b).tolist() == [[x * y * k % p] * cols] * 2


def test_narrow_blocks_bound_every_row() -> None:
    # The blocks keep every row's worst-case sum within the exact float64 budget.
    p = 2**31 - 1
    rng = np.random.default_rng(5)
    a = rng.integers(0, p, (7, 600))
    high = np.mod(a * (1 << 16), p)
    high = np.where(high > (p - 1) // 2, high - p, high)
    low = np.where(a > (p - 1) // 2, a - p, a)
    spans = narrow_blocks(high, low, p)
    assert spans[0][0] == 0
    assert spans[-1][1] == 600
    assert all(s[1] == t[0] for s, t in itertools.pairwise(spans))
    weights = np.abs(high).astype(object) * ((p - 1) >> 16) + np.abs(low).astype(object) * 0xFFFF
    for k0, k1 in spans:
        assert max(weights[:, k0:k1].sum(axis=1)) <= 2**53 - 2**32
        if k1 < 600:  # greedy: one more column would break the budget for some row
            assert max(weights[:, k0 : k1 + 1].sum(axis=1)) > 2**53 - 2**32
