"""Private class prototypes: IGPP (isotropic) and VPP (groupwise), seed 003 sections 4.1-4.2.

A participant releases, per class ``c``, the mean ``p_c`` of its ``n_c`` per-example
clipped features (``d``-dimensional, real units) plus Gaussian noise. Adjacency is the
paper's: one example of class ``c`` replaced by another of the same class (``n_c`` fixed),
so a class mean of features clipped to L2 norm ``R`` has L2 sensitivity ``Delta = 2R/n_c``
(:func:`mean_sensitivity`). Each example lies in one class, so the classes of one round
compose in parallel: a round is one Gaussian release per participant.

**IGPP**: clip each feature to ``R``; ``p~_c = p_c + N(0, (sigma_iso Delta)^2 I_d)`` with
``sigma_iso`` calibrated to ``(epsilon, delta)`` over the ``T`` planned rounds
(:func:`gaussian_multiplier`, exact for full participation: ``T`` releases of multiplier
``z`` are ``mu``-GDP with ``mu = sqrt(T)/z``).

**VPP**: the budget splits as ``(epsilon, delta) = (r epsilon, 0) + ((1-r) epsilon, delta)``.

1. Scores ``S_j = (V^ter_j / (C-1)) / (V^tra_j / (n-C) + zeta)`` (eq. 7-8,
   :func:`discriminative_scores`), clipped to ``[0, H]`` (l1 sensitivity ``H`` each).
2. One-shot Laplace top-k (eq. 9, Theorem 4.1): ``y_j = S_j + Lap(lambda)``, ``lambda =
   2 k H T / epsilon_1``; the ``k = ceil(rho d)`` largest ``y_j`` form ``I_A``. Each round is
   ``(epsilon_1/T, 0)``-DP, ``T`` rounds ``(epsilon_1, 0)``-DP (:func:`laplace_top_k`).
3. Groupwise clipping (eq. 10-11): ``z_A`` to ``R_A = R sqrt(d_A/d)``, ``z_B`` to ``R_B = R
   sqrt(d_B/d)`` (``R_A^2 + R_B^2 = R^2``), so ``Delta_A = 2R_A/n_c``, ``Delta_B = 2R_B/n_c``.
4. Groupwise noise (eq. 12-14): ``sigma_ref`` calibrated to ``(epsilon_2, delta)`` over ``T``
   rounds, ``sigma_A = sigma_ref / sqrt(w_A)``, ``sigma_B = sigma_ref / sqrt(w_B)`` with
   ``w_A = kappa_B / (kappa_A + kappa_B)``, ``kappa = sqrt(d_group / d)``;
   ``xi_A ~ N(0, (sigma_A Delta_A)^2 I_{d_A})``, ``xi_B ~ N(0, (sigma_B Delta_B)^2 I_{d_B})``.

Theorem 4.2 (the guarantee). For a difference ``v = [v_A; v_B]`` of two adjacent releases
(``||v_A|| <= Delta_A``, ``||v_B|| <= Delta_B``) the Rényi divergence of the groupwise
Gaussian is ``alpha/2 * v^T Sigma^-1 v <= alpha/2 (1/sigma_A^2 + 1/sigma_B^2)``, the isotropic
reference's is ``<= alpha / (2 sigma_ref^2)``. With ``1/sigma_A^2 + 1/sigma_B^2 <=
1/sigma_ref^2`` (eq. 19; equality for the weights above) the groupwise release is a
Gaussian mechanism of effective multiplier :func:`effective_multiplier` ``>= sigma_ref``:
its privacy loss is no larger at every order, hence ``(epsilon_2, delta)`` over ``T``
rounds; with the selection, ``(epsilon, delta)`` in all.

Pure numpy; noise from the injected :class:`~crypto.rng.RandomSource`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.dp.accounting import gaussian_epsilon_closed_form
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.rng import RandomSource

__all__ = [
    "GroupwiseNoise",
    "class_sums",
    "clip_rows",
    "discriminative_scores",
    "effective_multiplier",
    "gaussian_multiplier",
    "group_bounds",
    "groupwise_clip",
    "groupwise_noise",
    "isotropic_release",
    "laplace",
    "laplace_scale",
    "laplace_top_k",
    "mean_sensitivity",
    "privacy_loss_mu",
    "rdp_groupwise",
    "rdp_isotropic",
    "vpp_release",
]

Array = NDArray[np.float64]


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ParameterError(name, f"must be a number, not {value!r}")
    if not (math.isfinite(value) and value > 0.0):
        raise ParameterError(name, f"must be a finite number > 0, not {value}")
    return float(value)


def _positive_int(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ParameterError(name, f"must be an integer >= 1, not {value!r}")
    return value


def _features(features: NDArray[Any], labels: NDArray[Any], n_classes: int) -> tuple[Array, Any]:
    z = np.asarray(features, dtype=np.float64)
    y = np.asarray(labels).astype(np.int64)
    if z.ndim != 2 or y.shape != (z.shape[0],):
        raise ParameterError(
            "features", f"must be (n, d) with (n,) labels, not {z.shape} and {y.shape}"
        )
    if not np.all(np.isfinite(z)):
        raise ParameterError("features", "must contain only finite values")
    _positive_int("n_classes", n_classes)
    if y.size and (int(y.min()) < 0 or int(y.max()) >= n_classes):
        raise ParameterError("labels", f"must be in [0, {n_classes})")
    return z, y


def class_sums(
    features: NDArray[Any], labels: NDArray[Any], n_classes: int
) -> tuple[Array, NDArray[np.int64]]:
    """Per-class sums ``(C, d)`` and counts ``(C,)``; the prototype is ``sums[c] / counts[c]``.

    >>> s, n = class_sums(np.array([[1.0, 0.0], [3.0, 2.0], [5.0, 5.0]]), np.array([0, 0, 1]), 3)
    >>> (s / np.maximum(n, 1)[:, None]).tolist(), n.tolist()
    ([[2.0, 1.0], [5.0, 5.0], [0.0, 0.0]], [2, 1, 0])
    """
    z, y = _features(features, labels, n_classes)
    sums = np.zeros((n_classes, z.shape[1]))
    np.add.at(sums, y, z)
    return sums, np.bincount(y, minlength=n_classes).astype(np.int64)


def clip_rows(features: NDArray[Any], bound: float) -> Array:
    """Each row scaled to L2 norm at most ``bound`` (eq. 4): ``z min(1, R / ||z||)``."""
    bound = _positive("bound", bound)
    z = np.asarray(features, dtype=np.float64)
    norms = np.linalg.norm(z, axis=1, keepdims=True)
    return np.asarray(z * np.minimum(1.0, bound / np.maximum(norms, 1e-300)), dtype=np.float64)


def discriminative_scores(
    features: NDArray[Any], labels: NDArray[Any], n_classes: int, *, zeta: float = 1e-6
) -> Array:
    """ANOVA score per dimension, eq. (7)-(8); shape ``(d,)``, dimensionless.

    ``V^tra_j = sum_c (n_c - 1) s^2_{c,j}`` (within), ``V^ter_j = sum_c n_c (mu_{c,j} -
    mu_j)^2`` (between, over the classes present), ``S_j = (V^ter_j / (C - 1)) /
    (V^tra_j / (n - C) + zeta)`` with ``C`` the classes present (``C - 1`` and ``n - C``
    floored at 1).
    """
    zeta = _positive("zeta", zeta)
    z, y = _features(features, labels, n_classes)
    sums, counts = class_sums(z, y, n_classes)
    present = counts > 0
    c = int(present.sum())
    means = sums[present] / counts[present][:, None]  # (C, d)
    mu = z.mean(axis=0)
    between = (counts[present][:, None] * (means - mu) ** 2).sum(axis=0)
    within = ((z - (sums / np.maximum(counts, 1)[:, None])[y]) ** 2).sum(axis=0)
    return np.asarray(
        (between / max(c - 1, 1)) / (within / max(z.shape[0] - c, 1) + zeta), dtype=np.float64
    )


def laplace(rng: RandomSource, shape: int | tuple[int, ...]) -> Array:
    """Standard Laplace samples (scale 1) as the difference of two Exp(1) draws."""
    first = -np.log1p(-rng.uniform(shape))  # 1 - u in (0, 1]: finite
    second = -np.log1p(-rng.uniform(shape))
    return np.asarray(first - second, dtype=np.float64)


def laplace_scale(*, k: int, score_cap: float, epsilon: float, rounds: int) -> float:
    """``lambda = 2 k H T / epsilon_1`` (eq. 9): per round ``(epsilon_1 / T, 0)``-DP."""
    k = _positive_int("k", k)
    rounds = _positive_int("rounds", rounds)
    return 2.0 * k * _positive("score_cap", score_cap) * rounds / _positive("epsilon", epsilon)


def laplace_top_k(
    scores: NDArray[Any], *, k: int, score_cap: float, scale: float, rng: RandomSource
) -> NDArray[np.int64]:
    """Indices (sorted) of the ``k`` largest ``clip(S_j, 0, H) + Lap(scale)``."""
    s = np.asarray(scores, dtype=np.float64)
    if s.ndim != 1 or not 1 <= k <= s.size:
        raise ParameterError("k", f"must be in [1, {s.size}], not {k}")
    noisy = np.clip(s, 0.0, _positive("score_cap", score_cap)) + _positive(
        "scale", scale
    ) * laplace(rng, s.size)
    return np.sort(np.argsort(-noisy, kind="stable")[:k]).astype(np.int64)


def group_bounds(bound: float, d_a: int, d: int) -> tuple[float, float]:
    """``(R_A, R_B) = (R sqrt(d_A/d), R sqrt(d_B/d))`` (eq. 10)."""
    if not 1 <= d_a < d:
        raise ParameterError("d_a", f"must be in [1, {d - 1}], not {d_a}")
    bound = _positive("bound", bound)
    return bound * math.sqrt(d_a / d), bound * math.sqrt((d - d_a) / d)


def _mask(selected: NDArray[Any], d: int) -> NDArray[np.bool_]:
    mask = np.zeros(d, dtype=bool)
    idx = np.asarray(selected, dtype=np.int64)
    if idx.size == 0 or idx.size >= d or int(idx.min()) < 0 or int(idx.max()) >= d:
        raise ParameterError("selected", f"must hold 1 to {d - 1} indices in [0, {d})")
    mask[idx] = True
    if int(mask.sum()) != idx.size:
        raise ParameterError("selected", "must not repeat an index")
    return mask


def groupwise_clip(features: NDArray[Any], selected: NDArray[Any], *, bound: float) -> Array:
    """Clip ``z_A = z[selected]`` to ``R_A`` and ``z_B`` (the rest) to ``R_B`` (eq. 11)."""
    z = np.asarray(features, dtype=np.float64)
    mask = _mask(selected, z.shape[1])
    r_a, r_b = group_bounds(bound, int(mask.sum()), z.shape[1])
    out = z.copy()
    out[:, mask] = clip_rows(z[:, mask], r_a)
    out[:, ~mask] = clip_rows(z[:, ~mask], r_b)
    return out


def mean_sensitivity(bound: float, count: int) -> float:
    """``2 R / n_c``: L2 sensitivity of a class mean of ``n_c`` features clipped to ``R``
    (replace-one adjacency)."""
    return 2.0 * _positive("bound", bound) / _positive_int("count", count)


def gaussian_multiplier(*, epsilon: float, delta: float, rounds: int) -> float:
    """Smallest ``z`` with ``T`` Gaussian releases of multiplier ``z`` ``(epsilon, delta)``-DP.

    Exact (``mu``-GDP, ``mu = sqrt(T) / z``), solved on the closed form
    :func:`~crypto.dp.accounting.gaussian_epsilon_closed_form` and rounded up by 1e-9.

    >>> z = gaussian_multiplier(epsilon=1.0, delta=1e-5, rounds=10)
    >>> gaussian_epsilon_closed_form(z, 10, 1e-5) <= 1.0
    True
    """
    epsilon = _positive("epsilon", epsilon)
    rounds = _positive_int("rounds", rounds)
    if not 0.0 < delta < 1.0:
        raise ParameterError("delta", f"must be in (0, 1), not {delta}")

    def excess(log_z: float) -> float:
        return gaussian_epsilon_closed_form(math.exp(log_z), rounds, delta) - epsilon

    low, high = -10.0, 10.0
    if excess(high) > 0:
        raise ParameterError("epsilon", f"= {epsilon} is unreachable with z <= e^10")
    from scipy import optimize  # on first use: scipy's import is slow (crypto.dp.accounting)

    root = float(optimize.brentq(excess, low, high, xtol=1e-12))
    return math.exp(root) * (1.0 + 1e-9)


@dataclass(frozen=True)
class GroupwiseNoise:
    """VPP's multipliers for a partition of ``d`` dims into ``d_A`` selected and ``d_B``.

    ``sigma_a = sigma_ref / sqrt(w_A)``, ``sigma_b = sigma_ref / sqrt(w_B)``, ``w_A =
    kappa_B / (kappa_A + kappa_B)`` (eq. 12-13); the std of the noise per coordinate of a
    class mean of ``n_c`` features is ``sigma_a * 2 R_A / n_c`` (group A) and ``sigma_b *
    2 R_B / n_c`` (group B).
    """

    sigma_ref: float
    d_a: int
    d: int
    sigma_a: float
    sigma_b: float

    def stds(self, bound: float, count: int) -> tuple[float, float]:
        """Noise std per coordinate of groups A and B (real units of the prototype)."""
        r_a, r_b = group_bounds(bound, self.d_a, self.d)
        return (
            self.sigma_a * mean_sensitivity(r_a, count),
            self.sigma_b * mean_sensitivity(r_b, count),
        )


def groupwise_noise(sigma_ref: float, d_a: int, d: int) -> GroupwiseNoise:
    """The parameter-free weights of eq. (13) for ``d_A`` of ``d`` dims."""
    sigma_ref = _positive("sigma_ref", sigma_ref)
    group_bounds(1.0, d_a, d)  # checks d_a
    kappa_a, kappa_b = math.sqrt(d_a / d), math.sqrt((d - d_a) / d)
    w_a = kappa_b / (kappa_a + kappa_b)
    return GroupwiseNoise(
        sigma_ref, d_a, d, sigma_ref / math.sqrt(w_a), sigma_ref / math.sqrt(1.0 - w_a)
    )


def effective_multiplier(sigma_a: float, sigma_b: float) -> float:
    """``(1/sigma_A^2 + 1/sigma_B^2)^(-1/2)``: the groupwise release's worst-case privacy
    loss equals an isotropic Gaussian's of this multiplier (Theorem 4.2)."""
    return 1.0 / math.sqrt(
        1.0 / _positive("sigma_a", sigma_a) ** 2 + 1.0 / _positive("sigma_b", sigma_b) ** 2
    )


def rdp_isotropic(alpha: float, sigma: float) -> float:
    """Worst-case RDP of order ``alpha`` of one isotropic release: ``alpha / (2 sigma^2)``."""
    return _positive("alpha", alpha) / (2.0 * _positive("sigma", sigma) ** 2)


def rdp_groupwise(alpha: float, sigma_a: float, sigma_b: float) -> float:
    """Worst-case RDP of one groupwise release: ``alpha/2 (1/sigma_A^2 + 1/sigma_B^2)``."""
    return rdp_isotropic(alpha, effective_multiplier(sigma_a, sigma_b))


def privacy_loss_mu(v: NDArray[Any], stds: NDArray[Any]) -> float:
    """``sqrt(v^T Sigma^-1 v)`` for diagonal ``Sigma = diag(stds^2)``: one release with mean
    difference ``v`` is exactly ``mu``-GDP with this ``mu`` (its RDP is ``alpha mu^2 / 2``)."""
    diff = np.asarray(v, dtype=np.float64)
    s = np.asarray(stds, dtype=np.float64)
    return float(np.sqrt(np.sum((diff / s) ** 2)))


def isotropic_release(
    means: NDArray[Any],
    counts: NDArray[Any],
    *,
    bound: float,
    sigma: float,
    rng: RandomSource,
) -> Array:
    """IGPP (eq. 5): ``p~_c = p_c + N(0, (sigma 2R/n_c)^2 I)`` for classes with ``n_c >= 1``;
    rows of absent classes stay zero. ``means`` ``(C, d)`` of features clipped to ``R``."""
    p = np.asarray(means, dtype=np.float64)
    n = np.asarray(counts, dtype=np.int64)
    out = np.zeros_like(p)
    for c in np.flatnonzero(n > 0):
        std = sigma * mean_sensitivity(bound, int(n[c]))
        out[c] = p[c] + std * rng.standard_normal(p.shape[1])
    return out


def vpp_release(
    means: NDArray[Any],
    counts: NDArray[Any],
    selected: NDArray[Any],
    *,
    bound: float,
    noise: GroupwiseNoise,
    rng: RandomSource,
) -> Array:
    """VPP (eq. 14): group A coordinates get std ``sigma_A 2R_A/n_c``, group B ``sigma_B
    2R_B/n_c``; ``means`` ``(C, d)`` of groupwise-clipped features; absent classes zero."""
    p = np.asarray(means, dtype=np.float64)
    n = np.asarray(counts, dtype=np.int64)
    mask = _mask(selected, p.shape[1])
    if int(mask.sum()) != noise.d_a or p.shape[1] != noise.d:
        raise ParameterError("noise", f"is for d_A = {noise.d_a} of {noise.d} dims")
    out = np.zeros_like(p)
    for c in np.flatnonzero(n > 0):
        std_a, std_b = noise.stds(bound, int(n[c]))
        stds = np.where(mask, std_a, std_b)
        out[c] = p[c] + stds * rng.standard_normal(p.shape[1])
    return out
