"""Known answers for the privacy benchmark's metrics, attacks and KSG estimator."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from scipy.stats import norm

from bench.privacy.metrics import attack_score, roc_auc, tpr_at_fpr
from bench.privacy.mi import distance_leakage, gaussian_mi, ksg_mi
from bench.privacy.mia import (
    lira_scores,
    logit_confidence,
    loss_scores,
    paired_halves,
)

# -- metrics ---------------------------------------------------------------------------------


def test_auc_by_hand_with_ties() -> None:
    # members 3, 2, 1; non-members 2, 0: pairs (3>2, 3>0, 2=2 -> 1/2, 2>0, 1<2, 1>0) = 4.5 / 6
    assert roc_auc([3, 2, 1, 2, 0], [1, 1, 1, 0, 0]) == pytest.approx(4.5 / 6)
    assert roc_auc([1, 2], [0, 1]) == 1.0
    assert roc_auc([1, 2], [1, 0]) == 0.0


def test_tpr_at_fpr_by_hand() -> None:
    members = np.arange(100, 200, dtype=float)  # 100 members, 100..199
    non = np.arange(0, 100, dtype=float) + 150.5  # 100 non-members, 150.5..249.5
    scores = np.concatenate([members, non])
    labels = np.r_[np.ones(100), np.zeros(100)]
    # 1% of 100 non-members: one may be flagged, so t > 248.5: no member reaches it.
    assert tpr_at_fpr(scores, labels, 0.01) == 0.0
    # 60% may be flagged: t > 189.5 -> members 190..199.
    assert tpr_at_fpr(scores, labels, 0.6) == pytest.approx(0.10)
    assert tpr_at_fpr(scores, labels, 1.0) == 1.0
    with pytest.raises(ValueError, match="fpr"):
        tpr_at_fpr(scores, labels, 1.5)


def test_metrics_match_gaussian_theory() -> None:
    rng = np.random.default_rng(1)
    shift = 1.5
    members, non = rng.normal(shift, 1, 200_000), rng.normal(0, 1, 200_000)
    scores, labels = np.r_[members, non], np.r_[np.ones(members.size), np.zeros(non.size)]
    result = attack_score(scores, labels)
    assert result.auc == pytest.approx(norm.cdf(shift / math.sqrt(2)), abs=0.003)
    expected_tpr = 1 - norm.cdf(norm.ppf(0.99) - shift)
    assert result.tpr_at_1pct_fpr == pytest.approx(expected_tpr, abs=0.005)


def test_metrics_refuse_one_class() -> None:
    with pytest.raises(ValueError, match="one member and one non-member"):
        roc_auc([1.0, 2.0], [1, 1])


# -- scores and attacks ----------------------------------------------------------------------


def test_loss_and_confidence_scores_by_hand() -> None:
    logits = np.array([[2.0, 0.0, 0.0], [0.0, 0.0, 30.0]])
    labels = np.array([0, 2])
    p0 = math.exp(2) / (math.exp(2) + 2)
    assert loss_scores(logits, labels) == pytest.approx(
        [math.log(p0), -2 * math.exp(-30)], rel=1e-6
    )
    # phi = log p - log(1 - p): stable at p -> 1 (30 - log 2 for the second row).
    assert logit_confidence(logits, labels) == pytest.approx(
        [math.log(p0 / (1 - p0)), 30 - math.log(2)]
    )
    torch_loss = torch.nn.functional.cross_entropy(
        torch.tensor(logits), torch.tensor(labels), reduction="none"
    )
    assert loss_scores(logits, labels) == pytest.approx(-torch_loss.numpy())


def test_paired_halves_balance() -> None:
    masks = paired_halves(11, 3, np.random.default_rng(0))
    assert masks.shape == (6, 11)
    assert np.all(masks.sum(axis=0) == 3)  # each example IN for exactly one of every pair
    assert np.all(masks[0] ^ masks[1])


def test_lira_beats_global_threshold_on_heterogeneous_examples() -> None:
    """Examples differ in difficulty (offset b_j); membership adds +1 to phi. A global
    threshold on phi sees the offsets as noise; LiRA subtracts them with per-example means."""
    rng = np.random.default_rng(3)
    n, pairs, gain, noise = 4000, 4, 1.0, 0.5
    offset = rng.normal(0, 3, n)
    member = rng.random(n) < 0.5
    masks = paired_halves(n, pairs, rng)
    shadow = offset + gain * masks + rng.normal(0, noise, masks.shape)
    target = offset + gain * member + rng.normal(0, noise, n)
    lira = roc_auc(lira_scores(target, shadow, masks), member)
    threshold = roc_auc(target, member)
    ideal = norm.cdf(gain / (noise * math.sqrt(2)))  # known offsets, equal-variance Gaussians
    assert lira == pytest.approx(ideal, abs=0.03)
    assert threshold < 0.65 < lira


def test_lira_is_chance_without_membership_signal() -> None:
    rng = np.random.default_rng(4)
    n = 4000
    offset = rng.normal(0, 3, n)
    masks = paired_halves(n, 2, rng)
    member = rng.random(n) < 0.5
    shadow = offset + rng.normal(0, 0.5, masks.shape)
    target = offset + rng.normal(0, 0.5, n)
    assert roc_auc(lira_scores(target, shadow, masks), member) == pytest.approx(0.5, abs=0.03)


# -- KSG -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("rho", "pairs"), [(0.6, 1), (0.9, 1), (0.5, 3)])
def test_ksg_on_correlated_gaussians(rho: float, pairs: int) -> None:
    rng = np.random.default_rng(7)
    n = 3000
    x = rng.standard_normal((n, pairs))
    y = rho * x + math.sqrt(1 - rho**2) * rng.standard_normal((n, pairs))
    truth = gaussian_mi(rho, pairs)
    assert ksg_mi(x, y, k=3) == pytest.approx(truth, abs=0.05 + 0.03 * truth)


def test_ksg_on_independent_data_is_near_zero() -> None:
    rng = np.random.default_rng(8)
    x, y = rng.standard_normal((3000, 4)), rng.standard_normal((3000, 2))
    assert abs(ksg_mi(x, y)) < 0.03


def test_ksg_self_information_is_the_ceiling() -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((1000, 3))
    from scipy.special import digamma

    # The k-th joint neighbour lies within eps in one copy of x (jitter decides which), so the
    # estimate lies between psi(N) - psi(k + 1) and psi(N) - psi(k), about log N.
    value = ksg_mi(x, x, k=3)
    assert digamma(1000) - digamma(4) - 1e-9 <= value <= digamma(1000) - digamma(3) + 1e-9


def test_ksg_invariant_to_scale_and_refuses_bad_k() -> None:
    rng = np.random.default_rng(10)
    x = rng.standard_normal(500)
    y = x + rng.standard_normal(500)
    assert ksg_mi(1000 * x, y) == pytest.approx(ksg_mi(x, y), abs=1e-6)
    with pytest.raises(ValueError, match="'k'"):
        ksg_mi(x, y, k=500)


def test_distance_leaks_less_than_centre() -> None:
    (row,) = distance_leakage([2], [3], samples=2000, seed=0)
    assert row["mi_prompt_distance_inside"] < row["mi_prompt_centre_inside"]
    assert row["mi_prompt_centre_inside"] < row["mi_prompt_prompt"]
    # x ~ N(0, I), mu = (x + o1 + o2)/3: each coordinate pair has rho = 1/sqrt(3).
    assert row["mi_prompt_centre_inside"] == pytest.approx(
        gaussian_mi(1 / math.sqrt(3), 2), abs=0.06
    )


def test_distance_information_is_carried_by_the_norm() -> None:
    """Given x, D = |x - mu|^2 depends on |x| only (mu is rotation invariant), so I(x; D) =
    I(|x|^2; D): the multivariate estimate must agree with the one-dimensional one."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3000, 2))
    mu = rng.standard_normal((3000, 2)) / math.sqrt(3)
    d = ((x - mu) ** 2).sum(axis=1)
    assert ksg_mi(x, d) == pytest.approx(ksg_mi((x**2).sum(axis=1), d), abs=0.05)


def test_auc_standard_error_matches_spread_under_null() -> None:
    from bench.privacy.metrics import auc_standard_error

    rng = np.random.default_rng(12)
    aucs = [
        roc_auc(rng.standard_normal(300), np.r_[np.ones(150), np.zeros(150)]) for _ in range(400)
    ]
    assert auc_standard_error(0.5, 150, 150) == pytest.approx(float(np.std(aucs)), rel=0.12)
    assert auc_standard_error(0.5, 150, 150) == pytest.approx(
        math.sqrt(301 / (12 * 150 * 150)), rel=0.01
    )


def test_lira_score_is_the_gaussian_log_likelihood_ratio() -> None:
    # Three examples, two shadows (one pair). Every model's confidences have median 0, so the
    # centring leaves them as they are; a shift added to a whole model must change nothing.
    shadow = np.array([[3.0, 0.0, -1.0], [-2.0, 0.0, 4.0]])
    masks = np.array([[True, False, True], [False, True, False]])
    # one observation per mean: zero residuals, so a third shadow pair sets the variance
    shadow = np.vstack([shadow, [[1.0, 0.0, -2.0], [-4.0, 0.0, 2.0]]])
    masks = np.vstack([masks, [[True, True, False], [False, False, True]]])
    # ex 0: in 3, 1 (2), out -2, -4 (-3); ex 1: in 0, 0 (0), out 0, 0 (0);
    # ex 2: in -1, 2 (0.5), out 4, -2 (1). Residuals 1, 1, 1, 1, 0, 0, 0, 0, 2.25, 2.25, 9, 9
    # -> 26.5 over 12 - 6 = 6 dof.
    target = np.array([1.0, 0.0, -1.0])
    sd = math.sqrt(26.5 / 6)
    expected = [
        norm.logpdf(1.0, 2.0, sd) - norm.logpdf(1.0, -3.0, sd),
        0.0,
        norm.logpdf(-1.0, 0.5, sd) - norm.logpdf(-1.0, 1.0, sd),
    ]
    assert lira_scores(target, shadow, masks) == pytest.approx(expected)
    shifts = np.array([[5.0], [-1.0], [2.0], [0.5]])
    assert lira_scores(target + 7.0, shadow + shifts, masks) == pytest.approx(expected)


def test_lira_is_not_fooled_by_run_level_shifts() -> None:
    """Every shadow run adds its own offset to all examples (e.g. DP noise on a shared
    prompt) and the target its own; median centring removes them, so the membership gain
    (0.3, noise 0.3) is found as if there were no shifts."""
    rng = np.random.default_rng(5)
    n = 4000
    offset = rng.normal(0, 1, n)
    masks = paired_halves(n, 2, rng)
    run_shift = np.array([[2.0], [-2.0], [1.5], [-1.5]])
    shadow = offset + 0.3 * masks + run_shift + rng.normal(0, 0.3, masks.shape)
    member = rng.random(n) < 0.5
    target = offset + 0.3 * member + 3.0 + rng.normal(0, 0.3, n)
    shifted = roc_auc(lira_scores(target, shadow, masks), member)
    plain = roc_auc(lira_scores(target - 3.0, shadow - run_shift, masks), member)
    assert shifted == pytest.approx(plain, abs=0.01)
    assert shifted > 0.65


def test_distance_to_a_centre_is_independent_of_a_unit_prompt() -> None:
    """On the sphere, given x the law of D = 1 - 2<x, mu> + |mu|^2 is the same for every x
    (the other prompts are rotation invariant), so I(x; D) = 0 exactly; with the centre known
    the distance reveals <x, mu>, so it adds information."""
    (row,) = distance_leakage([3], [4], samples=2000, seed=1, unit=True)
    assert abs(row["mi_prompt_distance_inside"]) < 0.03
    assert abs(row["mi_prompt_distance_outside"]) < 0.03
    assert row["mi_prompt_distance_and_centre_inside"] > row["mi_prompt_centre_inside"] + 0.2
