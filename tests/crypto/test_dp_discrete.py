"""Tests of crypto.dp.discrete: the exact discrete Gaussian sampler (CKS 2020).

Every statistical check uses a fixed DeterministicRandom seed, so the suite is
deterministic. Chi-square checks compare the empirical histogram with the exact pmf
(bins with at least 20 expected counts, tails pooled) and require p > 1e-3; a wrong
acceptance probability, Laplace scale or sign rule moves the histogram by far more. Moment
checks are 5 standard errors wide (false alarm ~6e-7 for a correct sampler on a fresh seed).
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from secfpp.crypto.dp.discrete import (
    MAX_SIGMA2,
    _bernoulli_ratio,
    bernoulli_exp_neg,
    discrete_gaussian,
    discrete_gaussian_variance,
    discrete_laplace,
)
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.rng import DeterministicRandom

Z_BOUND = 5.0


def _chi_square_p(samples: np.ndarray, support: np.ndarray, weights: np.ndarray) -> float:
    """p-value of the samples against ``P[x] ~ weights`` on ``support`` (tails pooled)."""
    p = weights / weights.sum()
    expected = p * samples.size
    keep = support[expected >= 20]
    lo, hi = int(keep.min()), int(keep.max())
    observed = [np.sum(samples <= lo)] + [np.sum(samples == v) for v in range(lo + 1, hi)]
    observed.append(np.sum(samples >= hi))
    want = [p[support <= lo].sum()] + [p[support == v].sum() for v in range(lo + 1, hi)]
    want.append(p[support >= hi].sum())
    return float(stats.chisquare(np.array(observed), np.array(want) * samples.size).pvalue)


def _gaussian_pmf_weights(sigma2: Fraction, half_width: int) -> tuple[np.ndarray, np.ndarray]:
    support = np.arange(-half_width, half_width + 1)
    return support, np.exp(-(support.astype(np.float64) ** 2) / (2.0 * float(sigma2)))


# --- exact distribution -----------------------------------------------------------------


@pytest.mark.parametrize("sigma2", [Fraction(1, 3), Fraction(3, 2), Fraction(4), Fraction(49, 5)])
def test_discrete_gaussian_matches_its_pmf(sigma2: Fraction) -> None:
    samples = discrete_gaussian(sigma2, 60_000, rng=DeterministicRandom(f"chi2|{sigma2}"))
    support, weights = _gaussian_pmf_weights(sigma2, int(40 * math.sqrt(sigma2)) + 5)
    assert _chi_square_p(samples, support, weights) > 1e-3


def test_chi_square_check_rejects_a_rounded_gaussian() -> None:
    """The pmf check has teeth: round(N(0, sigma^2)) is not N_Z(0, sigma^2) at small sigma."""
    sigma2 = Fraction(1, 3)
    rounded = np.rint(math.sqrt(sigma2) * DeterministicRandom(1).standard_normal(60_000))
    support, weights = _gaussian_pmf_weights(sigma2, 30)
    assert _chi_square_p(rounded.astype(np.int64), support, weights) < 1e-6


@pytest.mark.parametrize(
    "sigma2", [Fraction(10**6), Fraction(2**56 + 1, 2**16), Fraction(7 * 10**20, 3), MAX_SIGMA2]
)
def test_large_sigma_mean_and_variance(sigma2: Fraction) -> None:
    samples = discrete_gaussian(sigma2, 40_000, rng=DeterministicRandom(f"moments|{sigma2}"))
    assert samples.dtype == np.int64
    var = discrete_gaussian_variance(sigma2)
    assert var == pytest.approx(float(sigma2), rel=1e-12)
    n = samples.size
    x = samples.astype(np.float64)
    assert abs(x.mean()) <= Z_BOUND * math.sqrt(var / n)
    # Var of the sample variance of a Gaussian: 2 var^2 / n.
    assert abs(x.var() - var) <= Z_BOUND * var * math.sqrt(2.0 / n)
    # Gaussian shape: P(|X| <= sigma) = 0.6827 in the continuous limit.
    inside = float(np.mean(np.abs(x) <= math.sqrt(var)))
    assert abs(inside - 0.682689) <= Z_BOUND * math.sqrt(0.682689 * 0.317311 / n)


def test_variance_is_below_sigma2_and_exact_for_small_sigma() -> None:
    sigma2 = Fraction(1, 3)
    x = np.arange(-50, 51, dtype=np.float64)
    weights = np.exp(-(x**2) * 1.5)
    by_hand = float(np.sum(weights * x**2) / np.sum(weights))
    assert discrete_gaussian_variance(sigma2) == pytest.approx(by_hand, rel=1e-12)
    assert by_hand < 1 / 3
    assert discrete_gaussian_variance(Fraction(1, 2)) < 0.5  # the gap ~ e^(-pi^2) shows here


@pytest.mark.parametrize("t", [1, 3, 40])
def test_discrete_laplace_matches_its_pmf(t: int) -> None:
    samples = discrete_laplace(t, 60_000, rng=DeterministicRandom(f"laplace|{t}"))
    support = np.arange(-60 * t, 60 * t + 1)
    assert _chi_square_p(samples, support, np.exp(-np.abs(support) / t)) > 1e-3


@pytest.mark.parametrize(
    "gamma", [Fraction(1, 3), Fraction(1), Fraction(5, 2), Fraction(7), Fraction(10**9 + 7, 10**9)]
)
def test_bernoulli_exp_neg_has_the_right_rate(gamma: Fraction) -> None:
    draws = bernoulli_exp_neg(gamma, 100_000, rng=DeterministicRandom(f"bern|{gamma}"))
    p = math.exp(-gamma)
    assert abs(draws.mean() - p) <= Z_BOUND * math.sqrt(p * (1 - p) / draws.size)


def test_bernoulli_exp_neg_of_zero_is_always_one() -> None:
    assert bernoulli_exp_neg(0, 1000, rng=DeterministicRandom(0)).all()


@pytest.mark.parametrize("den", [3, 3 * 2**100])  # the int64 path and the Python-int path
def test_rational_bernoulli_is_exact_at_the_edges_and_fair_inside(den: int) -> None:
    n = 50_000
    rng = DeterministicRandom(f"ratio|{den}")
    zero = _bernoulli_ratio(np.zeros(n, dtype=object), np.array(den, dtype=object), rng)
    one = _bernoulli_ratio(np.full(n, den, dtype=object), np.array(den, dtype=object), rng)
    assert not zero.any()
    assert one.all()
    third = _bernoulli_ratio(np.full(n, den // 3, dtype=object), np.array(den, dtype=object), rng)
    assert abs(third.mean() - 1 / 3) <= Z_BOUND * math.sqrt(2 / 9 / n)


# --- inputs and determinism -------------------------------------------------------------


def test_sampler_is_a_function_of_the_injected_source() -> None:
    first = discrete_gaussian(Fraction(9, 4), (30, 7), rng=DeterministicRandom(11))
    np.random.seed(0)  # numpy's global state plays no part
    again = discrete_gaussian(Fraction(9, 4), (30, 7), rng=DeterministicRandom(11))
    other = discrete_gaussian(Fraction(9, 4), (30, 7), rng=DeterministicRandom(12))
    assert first.shape == (30, 7)
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)


@given(
    num=st.integers(1, 10**12),
    den=st.integers(1, 10**6),
    size=st.integers(0, 50),
    seed=st.integers(0, 2**32),
)
def test_any_rational_sigma2_gives_reproducible_integers(
    num: int, den: int, size: int, seed: int
) -> None:
    sigma2 = Fraction(num, den)
    a = discrete_gaussian(sigma2, size, rng=DeterministicRandom(seed))
    b = discrete_gaussian(sigma2, size, rng=DeterministicRandom(seed))
    assert a.dtype == np.int64
    assert a.shape == (size,)
    np.testing.assert_array_equal(a, b)
    # Far tails are astronomically unlikely (P(|X| > 12 sigma + 1) < 1e-31).
    assert np.all(np.abs(a) <= 12 * math.sqrt(sigma2) + 1)


@pytest.mark.parametrize("bad", [1.5, True, Fraction(0), Fraction(-1, 2), MAX_SIGMA2 + 1, "2"])
def test_discrete_gaussian_refuses_bad_sigma2(bad: object) -> None:
    with pytest.raises(ParameterError) as info:
        discrete_gaussian(bad, 3, rng=DeterministicRandom(0))  # type: ignore[arg-type]
    assert info.value.parameter == "sigma2"


@pytest.mark.parametrize(
    ("call", "parameter"),
    [
        (lambda r: discrete_laplace(0, 3, rng=r), "t"),
        (lambda r: discrete_laplace(2.0, 3, rng=r), "t"),
        (lambda r: bernoulli_exp_neg(Fraction(-1), 3, rng=r), "gamma"),
        (lambda r: bernoulli_exp_neg(0.5, 3, rng=r), "gamma"),
        (lambda r: discrete_gaussian(1, (2, -1), rng=r), "shape"),
    ],
)
def test_other_bad_arguments_are_named(call: object, parameter: str) -> None:
    with pytest.raises(ParameterError) as info:
        call(DeterministicRandom(0))  # type: ignore[operator]
    assert info.value.parameter == parameter
