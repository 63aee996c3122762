"""Tests of crypto.dp.mechanisms: clipping, Gaussian noise scale, LDP and distributed noise.

Statistical checks use a fixed DeterministicRandom seed, so they are deterministic;
the bounds are 5 standard errors wide, so a *correct* implementation run with a
fresh random seed would fail each check with probability about 6e-7 (two-sided
normal tail at 5 sigma). A wrong scale (sigma^2 for sigma, a missing sqrt(m), no
clipping) is off by tens to hundreds of standard errors.
"""

from __future__ import annotations

import doctest
import importlib
import math
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from secfpp.crypto.dp.discrete import discrete_gaussian_variance
from secfpp.crypto.dp.mechanisms import (
    MIN_SHARE_SIGMA,
    clip_entries,
    clip_l2,
    discrete_gaussian_mechanism,
    distributed_noise_share,
    gaussian_mechanism,
    gdp_sigma,
    lattice_sigma2,
    ldp_noisy_gradient,
    mean_sensitivity,
)
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.rng import DeterministicRandom

Z_BOUND = 5.0  # standard errors; two-sided false-alarm rate ~5.7e-7 per check

finite = st.floats(min_value=-1e6, max_value=1e6, allow_nan=False, allow_infinity=False)
vectors = arrays(np.float64, st.integers(1, 64), elements=finite)
bounds = st.floats(min_value=1e-3, max_value=1e3)


def _assert_std(samples: np.ndarray, sigma: float) -> None:
    """Sample mean ~ 0 and sample std ~ sigma, each within Z_BOUND standard errors."""
    n = samples.size
    assert abs(samples.mean()) <= Z_BOUND * sigma / math.sqrt(n)
    # The std of the sample std of n normals is sigma / sqrt(2 n).
    assert abs(samples.std() - sigma) <= Z_BOUND * sigma / math.sqrt(2 * n)


# --- clipping -------------------------------------------------------------------------


@given(x=vectors, bound=bounds)
def test_clip_l2_norm_is_at_most_bound_and_direction_is_kept(x: np.ndarray, bound: float) -> None:
    clipped = clip_l2(x, bound)
    norm = np.linalg.norm(x)
    assert np.linalg.norm(clipped) <= bound * (1 + 1e-12)
    if norm <= bound:
        np.testing.assert_array_equal(clipped, x)
    else:
        # Scaled down, not truncated: same direction, norm exactly the bound.
        np.testing.assert_allclose(clipped * (norm / bound), x, rtol=1e-9, atol=1e-300)
        assert np.linalg.norm(clipped) == pytest.approx(bound, rel=1e-9)


@given(x=vectors, bound=bounds)
def test_clip_l2_is_idempotent(x: np.ndarray, bound: float) -> None:
    once = clip_l2(x, bound)
    np.testing.assert_allclose(clip_l2(once, bound), once, rtol=1e-12)


def test_clip_l2_uses_the_norm_of_the_whole_matrix() -> None:
    x = np.full((4, 4), 1.0)  # Frobenius norm 4, every row norm 2
    np.testing.assert_allclose(clip_l2(x, 2.0), np.full((4, 4), 0.5))
    assert clip_l2(x, 2.0).shape == (4, 4)


def test_clip_l2_does_not_modify_its_input() -> None:
    x = np.array([3.0, 4.0])
    clip_l2(x, 1.0)
    np.testing.assert_array_equal(x, [3.0, 4.0])


@given(x=vectors, bound=bounds)
def test_clip_entries_bounds_every_entry(x: np.ndarray, bound: float) -> None:
    clipped = clip_entries(x, bound)
    assert np.all(np.abs(clipped) <= bound)
    inside = np.abs(x) <= bound
    np.testing.assert_array_equal(clipped[inside], x[inside])
    np.testing.assert_array_equal(np.sign(clipped[~inside]), np.sign(x[~inside]))


@pytest.mark.parametrize("bound", [0.0, -1.0, math.inf, math.nan])
@pytest.mark.parametrize("clip", [clip_l2, clip_entries])
def test_clipping_refuses_a_bad_bound(clip, bound: float) -> None:
    with pytest.raises(ParameterError) as info:
        clip(np.ones(3), bound)
    assert info.value.parameter == "bound"


def test_clipping_refuses_non_finite_input() -> None:
    with pytest.raises(ParameterError, match="finite"):
        clip_l2(np.array([1.0, np.nan]), 1.0)


# --- sensitivity and the Gaussian mechanism ---------------------------------------------


def test_mean_sensitivity_is_clip_norm_over_contributors() -> None:
    # Add/remove relation: one update of norm <= C moves the mean of m by <= C / m.
    assert mean_sensitivity(clip_norm=10.0, n_contributors=4) == 2.5
    assert gdp_sigma(noise_multiplier=1.2, clip_norm=10.0, n_contributors=4) == pytest.approx(3.0)


def test_mean_sensitivity_bounds_the_change_of_a_clipped_mean() -> None:
    rng = DeterministicRandom(b"sensitivity")
    clip, m = 3.0, 5
    updates = [clip_l2(10 * rng.standard_normal(32), clip) for _ in range(m)]
    with_all = sum(updates) / m
    zeroed = (sum(updates[1:]) + np.zeros(32)) / m  # participant 0 zeroed out
    change = np.linalg.norm(with_all - zeroed)
    assert change == pytest.approx(mean_sensitivity(clip_norm=clip, n_contributors=m))


@pytest.mark.parametrize("n_contributors", [0, -1, 2.0, True])
def test_mean_sensitivity_refuses_bad_counts(n_contributors: object) -> None:
    with pytest.raises(ParameterError) as info:
        mean_sensitivity(clip_norm=1.0, n_contributors=n_contributors)  # type: ignore[arg-type]
    assert info.value.parameter == "n_contributors"


def test_gaussian_mechanism_adds_noise_of_the_calibrated_scale() -> None:
    sigma = gdp_sigma(noise_multiplier=1.5, clip_norm=10.0, n_contributors=6)  # 2.5
    value = np.linspace(-1.0, 1.0, 200_000).reshape(400, 500)
    noisy = gaussian_mechanism(value, sigma=sigma, rng=DeterministicRandom(b"gdp-scale"))
    assert noisy.shape == value.shape
    noise = (noisy - value).ravel()
    _assert_std(noise, sigma)
    # Gaussian shape, not just the right variance: P(|N| <= sigma) = 0.6827.
    inside = np.mean(np.abs(noise) <= sigma)
    assert abs(inside - 0.682689) <= Z_BOUND * math.sqrt(0.682689 * 0.317311 / noise.size)


def test_gaussian_mechanism_draws_from_the_injected_source() -> None:
    value = np.zeros(8)
    first = gaussian_mechanism(value, sigma=1.0, rng=DeterministicRandom(7))
    again = gaussian_mechanism(value, sigma=1.0, rng=DeterministicRandom(7))
    other = gaussian_mechanism(value, sigma=1.0, rng=DeterministicRandom(8))
    np.testing.assert_array_equal(first, again)
    assert not np.array_equal(first, other)
    np.testing.assert_allclose(first, DeterministicRandom(7).standard_normal(8))


@pytest.mark.parametrize("sigma", [0.0, -1.0, math.nan, math.inf])
def test_gaussian_mechanism_refuses_a_bad_sigma(sigma: float) -> None:
    with pytest.raises(ParameterError) as info:
        gaussian_mechanism(np.zeros(2), sigma=sigma, rng=DeterministicRandom(0))
    assert info.value.parameter == "sigma"


def test_ldp_noise_clips_then_adds_z_times_clip_norm() -> None:
    clip, z = 10.0, 0.8
    rng = DeterministicRandom(b"ldp")
    gradient = 50.0 + rng.standard_normal((400, 250))  # norm ~ 1.6e4 >> clip
    noisy = ldp_noisy_gradient(
        gradient.astype(np.float32), clip_norm=clip, noise_multiplier=z, rng=rng
    )
    assert noisy.dtype == np.float64
    assert noisy.shape == gradient.shape
    residual = (noisy - clip_l2(gradient.astype(np.float32), clip)).ravel()
    _assert_std(residual, z * clip)


# --- distributed noise ------------------------------------------------------------------


def _summed_shares(shape: tuple[int, ...], sigma_total: float, m: int, scale: int) -> np.ndarray:
    total = np.zeros(shape, dtype=np.int64)
    for i in range(m):
        share = distributed_noise_share(
            shape,
            sigma_total=sigma_total,
            n_contributors=m,
            scale=scale,
            rng=DeterministicRandom(f"participant-{i}"),
        )
        assert share.dtype == np.int64
        assert share.shape == shape
        total += share
    return total


def test_distributed_shares_sum_to_the_target_variance() -> None:
    sigma_total, m, scale = 0.01, 5, 2**12  # sigma_q = 40.96, per-share sigma 18.3
    total = _summed_shares((100, 500), sigma_total, m, scale)
    sigma2 = lattice_sigma2(sigma_total, scale=scale, shares=m)
    target_var = m * discrete_gaussian_variance(sigma2)  # exact, no rounding term
    assert target_var == pytest.approx((sigma_total * scale) ** 2, rel=1e-6)
    n = total.size
    # Var of the sample variance of n normals: 2 var^2 / n.
    assert abs(total.var() - target_var) <= Z_BOUND * target_var * math.sqrt(2 / n)
    assert abs(total.mean()) <= Z_BOUND * math.sqrt(target_var / n)
    # In real units (divide by the scale) the sum carries sigma_total.
    assert (total / scale).std() == pytest.approx(sigma_total, rel=0.02)


def test_distributed_shares_have_no_rounding_term() -> None:
    # Per-share sigma exactly 1 unit: the old rounded-Gaussian shares added m/12 = 1/3 to
    # the variance of the sum (13 standard errors here); discrete Gaussian shares add none.
    m, scale = 4, 1
    total = _summed_shares((100, 500), 2.0, m, scale)
    target_var = m * discrete_gaussian_variance(lattice_sigma2(2.0, shares=m))
    assert target_var == pytest.approx(4.0, abs=1e-3)
    n = total.size
    assert abs(total.var() - target_var) <= Z_BOUND * target_var * math.sqrt(2 / n)


def test_distributed_share_refuses_a_sigma_below_half_a_unit() -> None:
    with pytest.raises(ParameterError) as info:
        distributed_noise_share(
            3, sigma_total=1e-4, n_contributors=4, scale=2.0**10, rng=DeterministicRandom(0)
        )
    assert info.value.parameter == "sigma_total"
    assert "quantized units" in str(info.value)
    assert str(MIN_SHARE_SIGMA) in str(info.value)


@given(
    sigma=st.floats(min_value=1e-3, max_value=1e3),
    bits=st.integers(0, 30),
    shares=st.integers(1, 1000),
)
# more examples than the profile (cheap, exact arithmetic): rounding corners are rare draws
@settings(max_examples=200)
def test_lattice_sigma2_never_rounds_the_noise_down(sigma: float, bits: int, shares: int) -> None:
    got = lattice_sigma2(sigma, scale=2**bits, shares=shares)
    exact = (Fraction(sigma) * 2**bits) ** 2 / shares
    assert got >= exact
    assert got - exact <= exact * Fraction(2, 2**40) + Fraction(1, 2**16)
    assert got.denominator <= 2**16


def test_discrete_gaussian_mechanism_adds_integer_noise_of_the_given_parameter() -> None:
    value = np.arange(-50_000, 50_000, dtype=np.int64).reshape(200, 500)
    noisy = discrete_gaussian_mechanism(value, sigma2=Fraction(625, 4), rng=DeterministicRandom(3))
    assert noisy.dtype == np.int64
    assert noisy.shape == value.shape
    noise = (noisy - value).ravel()
    _assert_std(noise.astype(np.float64), math.sqrt(discrete_gaussian_variance(Fraction(625, 4))))
    again = discrete_gaussian_mechanism(value, sigma2=Fraction(625, 4), rng=DeterministicRandom(3))
    np.testing.assert_array_equal(noisy, again)


def test_discrete_gaussian_mechanism_refuses_real_values() -> None:
    with pytest.raises(ParameterError) as info:
        discrete_gaussian_mechanism(np.zeros(3), sigma2=1, rng=DeterministicRandom(0))
    assert info.value.parameter == "value"


def test_dp_core_imports_no_framework() -> None:
    code = (
        "import sys, crypto.dp\n"
        "bad = [m for m in ('torch', 'fastapi', 'sqlalchemy', 'httpx', 'requests') "
        "if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    root = Path(__file__).resolve().parents[2]
    subprocess.run([sys.executable, "-c", code], check=True, cwd=root)


@pytest.mark.parametrize(
    "module",
    [
        "secfpp.crypto.dp.mechanisms",
        "secfpp.crypto.dp.accounting",
        "secfpp.crypto.dp.discrete",
        "secfpp.crypto.dp.distributed",
    ],
)
def test_docstring_examples_run(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.attempted > 0
    assert result.failed == 0
