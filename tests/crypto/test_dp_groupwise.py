"""Tests of crypto.dp.groupwise: prototypes, scores, private top-k, groupwise clipping and noise,
and the accounting of Theorem 4.2 (VPP's groupwise release is no weaker than the isotropic
reference at the same budget).

Statistical checks use fixed DeterministicRandom seeds (deterministic); their tolerances are
about 5 standard errors, so a wrong scale (a missing sqrt(w), R instead of R_A, n_c missing)
fails by many standard errors.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from secfpp.crypto.dp.accounting import epsilon_for, gaussian_epsilon_closed_form
from secfpp.crypto.dp.groupwise import (
    class_sums,
    clip_rows,
    discriminative_scores,
    effective_multiplier,
    gaussian_multiplier,
    group_bounds,
    groupwise_clip,
    groupwise_noise,
    isotropic_release,
    laplace,
    laplace_scale,
    laplace_top_k,
    mean_sensitivity,
    privacy_loss_mu,
    rdp_groupwise,
    rdp_isotropic,
    vpp_release,
)
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.rng import DeterministicRandom


def test_class_sums_and_means_known_answer() -> None:
    z = np.array([[1.0, 0.0], [3.0, 2.0], [5.0, 5.0], [-1.0, 4.0]])
    sums, counts = class_sums(z, np.array([0, 0, 2, 0]), 3)
    assert counts.tolist() == [3, 0, 1]
    assert sums.tolist() == [[3.0, 6.0], [0.0, 0.0], [5.0, 5.0]]
    assert (sums[0] / counts[0]).tolist() == [1.0, 2.0]


def test_scores_known_answer() -> None:
    # dim 0: class means 0.5 and 3.5 around 2 -> between 9 (C-1 = 1), within 1 (n-C = 2):
    # S = 9 / (1/2) = 18; dim 1: equal class means -> 0.
    z = np.array([[0.0, 1.0], [1.0, -1.0], [3.0, 1.0], [4.0, -1.0]])
    scores = discriminative_scores(z, np.array([0, 0, 1, 1]), 2, zeta=1e-12)
    np.testing.assert_allclose(scores, [18.0, 0.0], atol=1e-9)


def test_laplace_has_unit_scale() -> None:
    x = laplace(DeterministicRandom("laplace"), 200_000)
    assert abs(x.mean()) < 5 * math.sqrt(2 / 200_000)
    assert abs(x.var() - 2.0) < 0.05  # Var Lap(1) = 2
    assert abs(np.abs(x).mean() - 1.0) < 0.015  # E|Lap(1)| = 1


def test_laplace_scale_is_eq_9() -> None:
    assert laplace_scale(k=10, score_cap=0.5, epsilon=0.2, rounds=4) == pytest.approx(200.0)


def _separable(
    rng: np.random.Generator, d: int = 40, informative: int = 6
) -> tuple[np.ndarray, np.ndarray]:
    labels = rng.integers(0, 4, 400)
    z = rng.normal(0, 1, (400, d))
    centres = rng.normal(0, 3, (4, informative))
    z[:, :informative] += centres[labels]
    return z, labels


def test_top_k_picks_high_score_dims_at_large_epsilon() -> None:
    z, y = _separable(np.random.default_rng(0))
    scores = discriminative_scores(z, y, 4)
    cap = float(scores.max())
    scale = laplace_scale(k=6, score_cap=cap, epsilon=1e6, rounds=1)
    picked = laplace_top_k(scores, k=6, score_cap=cap, scale=scale, rng=DeterministicRandom(1))
    assert picked.tolist() == [0, 1, 2, 3, 4, 5]


def test_top_k_is_noise_at_small_epsilon() -> None:
    """At epsilon_1 = 0.01 the noise swamps the capped scores: the informative dims are
    picked about as often as chance (6/40 each), far from always."""
    z, y = _separable(np.random.default_rng(0))
    scores = discriminative_scores(z, y, 4)
    scale = laplace_scale(k=6, score_cap=1.0, epsilon=0.01, rounds=1)
    rng = DeterministicRandom(2)
    hits = sum(
        int(
            np.isin(laplace_top_k(scores, k=6, score_cap=1.0, scale=scale, rng=rng), range(6)).sum()
        )
        for _ in range(200)
    )
    assert hits / (200 * 6) < 0.3


def test_clipping_bounds_hold() -> None:
    rng = np.random.default_rng(3)
    z = rng.normal(0, 2, (500, 20))
    z[:10] *= 1e-3  # some rows already inside every bound
    clipped = clip_rows(z, 1.5)
    assert np.all(np.linalg.norm(clipped, axis=1) <= 1.5 + 1e-12)
    np.testing.assert_array_equal(clipped[:10], z[:10])
    selected = np.array([1, 4, 7, 9])
    out = groupwise_clip(z, selected, bound=1.5)
    r_a, r_b = group_bounds(1.5, 4, 20)
    assert r_a**2 + r_b**2 == pytest.approx(1.5**2)
    mask = np.isin(np.arange(20), selected)
    assert np.all(np.linalg.norm(out[:, mask], axis=1) <= r_a + 1e-12)
    assert np.all(np.linalg.norm(out[:, ~mask], axis=1) <= r_b + 1e-12)
    assert np.all(np.linalg.norm(out, axis=1) <= 1.5 + 1e-12)
    np.testing.assert_array_equal(out[:10], z[:10])
    # Each group is scaled, never rotated.
    big = np.argmax(np.linalg.norm(z[:, mask], axis=1))
    cos = (
        out[big, mask]
        @ z[big, mask]
        / np.linalg.norm(out[big, mask])
        / np.linalg.norm(z[big, mask])
    )
    assert cos == pytest.approx(1.0)


def test_gaussian_multiplier_meets_the_budget_exactly() -> None:
    z = gaussian_multiplier(epsilon=1.0, delta=1e-5, rounds=10)
    assert gaussian_epsilon_closed_form(z, 10, 1e-5) <= 1.0
    assert gaussian_epsilon_closed_form(z * 0.999, 10, 1e-5) > 1.0  # smallest, not just valid
    # dp-accounting's PLD agrees with the closed form it is independent of.
    assert epsilon_for(z, rounds=10, delta=1e-5) == pytest.approx(1.0, rel=0.01)


BUDGETS = [(0.5, 1e-5, 20, 0.2, 512), (1.0, 1e-5, 5, 0.5, 64), (8.0, 1e-6, 1, 0.05, 100)]


@pytest.mark.parametrize(("epsilon", "delta", "rounds", "rho", "d"), BUDGETS)
def test_vpp_is_no_weaker_than_the_isotropic_reference(
    epsilon: float, delta: float, rounds: int, rho: float, d: int
) -> None:
    """Theorem 4.2 on the numbers the code uses, with the budget split of section 4.2."""
    r = 0.1
    eps1, eps2 = r * epsilon, (1 - r) * epsilon
    sigma_ref = gaussian_multiplier(epsilon=eps2, delta=delta, rounds=rounds)
    d_a = math.ceil(rho * d)
    noise = groupwise_noise(sigma_ref, d_a, d)
    # Calibration condition (19), with equality for the weights of eq. (13).
    harmonic = 1 / noise.sigma_a**2 + 1 / noise.sigma_b**2
    assert harmonic <= 1 / sigma_ref**2 * (1 + 1e-12)
    assert harmonic == pytest.approx(1 / sigma_ref**2)
    # RDP at every order: groupwise <= reference.
    for alpha in (1.01, 1.5, 2, 4, 16, 64, 256):
        assert rdp_groupwise(alpha, noise.sigma_a, noise.sigma_b) <= rdp_isotropic(
            alpha, sigma_ref
        ) * (1 + 1e-12)
    # (eps, delta): the groupwise release's worst case is a Gaussian of the effective
    # multiplier; over T rounds it spends <= eps2, plus eps1 for the selection <= eps.
    z_eff = effective_multiplier(noise.sigma_a, noise.sigma_b)
    eps_release = gaussian_epsilon_closed_form(z_eff, rounds, delta)
    assert eps_release <= eps2 + 1e-9
    assert eps1 + eps_release <= epsilon + 1e-9
    # The privacy loss of actual adjacent pairs: v_A, v_B anywhere in their balls (on the
    # boundary: worst case), mu(v) = sqrt(v^T Sigma^-1 v) <= the reference's 1 / sigma_ref.
    bound, count = 1.0, 7
    std_a, std_b = noise.stds(bound, count)
    r_a, r_b = group_bounds(bound, d_a, d)
    delta_a, delta_b = mean_sensitivity(r_a, count), mean_sensitivity(r_b, count)
    stds = np.concatenate([np.full(d_a, std_a), np.full(d - d_a, std_b)])
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(200):
        va, vb = rng.normal(size=d_a), rng.normal(size=d - d_a)
        va *= delta_a / np.linalg.norm(va) * rng.uniform(0.9, 1.0)
        vb *= delta_b / np.linalg.norm(vb)  # on the boundary
        worst = max(worst, privacy_loss_mu(np.concatenate([va, vb]), stds))
    assert worst <= 1 / sigma_ref * (1 + 1e-9)
    # The discriminative group gets no more noise than the isotropic reference (rho <= 1/2).
    assert std_a <= sigma_ref * mean_sensitivity(bound, count) * (1 + 1e-12)
    # The test can fail: an allocation that skips the weights (sigma_A = sigma_B = sigma_ref)
    # leaks more than the reference at the boundary.
    naive = np.concatenate(
        [np.full(d_a, sigma_ref * delta_a), np.full(d - d_a, sigma_ref * delta_b)]
    )
    va, vb = np.full(d_a, delta_a / math.sqrt(d_a)), np.full(d - d_a, delta_b / math.sqrt(d - d_a))
    assert privacy_loss_mu(np.concatenate([va, vb]), naive) > 1 / sigma_ref * 1.2


def test_vpp_noise_per_group_matches_the_accountant() -> None:
    d, d_a, count, bound = 50, 10, 8, 1.0
    sigma_ref = gaussian_multiplier(epsilon=0.9, delta=1e-5, rounds=4)
    noise = groupwise_noise(sigma_ref, d_a, d)
    selected = np.arange(5, 5 + d_a)
    classes = 4000
    means = np.full((classes, d), 0.01)
    counts = np.full(classes, count)
    out = vpp_release(means, counts, selected, bound=bound, noise=noise, rng=DeterministicRandom(7))
    mask = np.isin(np.arange(d), selected)
    std_a, std_b = noise.stds(bound, count)
    assert std_a == pytest.approx(noise.sigma_a * 2 * bound * math.sqrt(d_a / d) / count)
    assert std_b == pytest.approx(noise.sigma_b * 2 * bound * math.sqrt((d - d_a) / d) / count)
    # n = 40,000 (A) and 160,000 (B) draws: relative s.e. of the std ~ 1/sqrt(2n) < 0.4 %.
    assert (out[:, mask] - 0.01).std() == pytest.approx(std_a, rel=0.02)
    assert (out[:, ~mask] - 0.01).std() == pytest.approx(std_b, rel=0.01)
    assert abs((out - 0.01).mean()) < 5 * std_b / math.sqrt(out.size)
    assert std_a < std_b  # less noise on the discriminative group


def test_isotropic_noise_matches_the_accountant_and_skips_absent_classes() -> None:
    sigma = gaussian_multiplier(epsilon=1.0, delta=1e-5, rounds=3)
    means = np.zeros((3000, 20))
    counts = np.full(3000, 5)
    counts[0] = 0
    out = isotropic_release(means, counts, bound=2.0, sigma=sigma, rng=DeterministicRandom(8))
    assert np.all(out[0] == 0.0)
    assert out[1:].std() == pytest.approx(sigma * 2 * 2.0 / 5, rel=0.01)


def test_bad_arguments_are_named() -> None:
    with pytest.raises(ParameterError, match="'k'"):
        laplace_top_k(np.zeros(5), k=6, score_cap=1.0, scale=1.0, rng=DeterministicRandom(0))
    with pytest.raises(ParameterError, match="'d_a'"):
        groupwise_noise(1.0, 10, 10)
    with pytest.raises(ParameterError, match="'epsilon'"):
        gaussian_multiplier(epsilon=0.0, delta=1e-5, rounds=1)
    with pytest.raises(ParameterError, match="'selected'"):
        groupwise_clip(np.zeros((2, 4)), np.array([1, 1]), bound=1.0)
