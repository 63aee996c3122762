"""Membership inference against a trained prompt: the loss-threshold attack and online LiRA.

Every attack sees one participant's final model (its context ``G + L`` on the frozen backbone)
and a set of candidate examples ``(feature, label)``; it scores each candidate, higher meaning
"more likely in that participant's training set".

* **Loss threshold** (Yeom et al. 2018; the attack of DP-FPL's evaluation, seed 000 A.3, in
  its threshold form): ``score = -CE(model(x), y)``. One global threshold for all examples.
* **LiRA, online** (Carlini et al. 2022): the statistic is the logit-scaled confidence
  ``phi = log p_y - log(1 - p_y) = z_y - logsumexp_{c != y} z_c`` (``z``: logits). ``K``
  shadow models are trained like the target, each on a random half of the candidates (paired
  halves, so every candidate is IN for exactly ``K/2`` shadows and OUT for the other ``K/2``).
  Per example ``j`` the IN and OUT confidences are modelled as ``N(mu_in[j], s^2)`` and
  ``N(mu_out[j], s^2)``; the score is the log likelihood ratio
  ``log N(phi_target[j]; mu_in[j], s) - log N(phi_target[j]; mu_out[j], s)
  = (mu_in[j] - mu_out[j]) (phi_target[j] - (mu_in[j] + mu_out[j]) / 2) / s^2``. With a
  handful of shadows a per-example variance is unreliable, so the variance is pooled over all
  examples (the "global variance" variant LiRA recommends for few shadows), and over IN and OUT
  alike: with separate IN and OUT variances the ratio is quadratic in ``phi``, and when
  run-to-run differences dominate (DP noise on a shared prompt shifts every example of a run)
  it ranks examples by their distance from the shadow means rather than by membership (it gave
  AUC 0.44-0.45 on DP-FPL here). The means stay per example, which is what lets LiRA beat the
  loss attack on easy and hard examples. Before fitting, each model's ``phi`` (the target's and
  every shadow's) is centred on its median over all candidates: a run-level shift (one run's
  noise made its shared prompt better or worse on everything) is then not read as membership.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

__all__ = [
    "lira_scores",
    "logit_confidence",
    "loss_scores",
    "paired_halves",
    "stack_confidences",
]


def _check(logits: ArrayLike, labels: ArrayLike) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
    z = np.asarray(logits, dtype=np.float64)
    y = np.asarray(labels, dtype=np.int64).reshape(-1)
    if z.ndim != 2 or z.shape[0] != y.size or z.shape[1] < 2:
        raise ValueError(
            f"Argument 'logits' must be (N, n_cls >= 2) with N = len(labels) = {y.size}, not "
            f"{z.shape}"
        )
    if y.size and (y.min() < 0 or y.max() >= z.shape[1]):
        raise ValueError(f"Argument 'labels' must be in [0, {z.shape[1]})")
    return z, y


def loss_scores(logits: ArrayLike, labels: ArrayLike) -> NDArray[np.float64]:
    """``-CE = log softmax(z)_y`` per example, ``(N,)``: the loss-threshold attack's score."""
    z, y = _check(logits, labels)
    shifted = z - z.max(axis=1, keepdims=True)
    log_norm = np.log(np.exp(shifted).sum(axis=1))
    return np.asarray(shifted[np.arange(y.size), y] - log_norm)


def logit_confidence(logits: ArrayLike, labels: ArrayLike) -> NDArray[np.float64]:
    """``phi = z_y - logsumexp_{c != y} z_c`` per example, ``(N,)`` (stable for ``p_y -> 1``)."""
    z, y = _check(logits, labels)
    rows = np.arange(y.size)
    true = z[rows, y]
    others = z.copy()
    others[rows, y] = -np.inf
    top = others.max(axis=1)
    rest = top + np.log(np.exp(others - top[:, None]).sum(axis=1))
    return np.asarray(true - rest)


def paired_halves(n: int, pairs: int, rng: np.random.Generator) -> NDArray[np.bool_]:
    """IN masks ``(2 pairs, n)``: row ``2k`` a random half, row ``2k+1`` its complement.

    Every example is IN for exactly ``pairs`` rows (``n`` odd: the middle example goes to the
    first half of each pair).
    """
    if n < 2 or pairs < 1:
        raise ValueError(f"Arguments 'n' (>= 2) and 'pairs' (>= 1) are {n} and {pairs}")
    masks = np.zeros((2 * pairs, n), dtype=bool)
    for k in range(pairs):
        half = rng.permutation(n)[: (n + 1) // 2]
        masks[2 * k, half] = True
        masks[2 * k + 1] = ~masks[2 * k]
    return masks


def _fit(
    shadow: NDArray[np.float64], mask: NDArray[np.bool_]
) -> tuple[NDArray[np.float64], float, int]:
    """Per-example means over the shadows where ``mask`` holds, the sum of squared residuals
    and its degrees of freedom (observations minus fitted means)."""
    counts = mask.sum(axis=0)
    if np.any(counts == 0):
        raise ValueError("every example needs at least one IN and one OUT shadow")
    means = np.where(mask, shadow, 0.0).sum(axis=0) / counts
    residual = np.where(mask, shadow - means, 0.0)
    return means, float((residual**2).sum()), int(mask.sum()) - int(counts.size)


def lira_scores(target: ArrayLike, shadow: ArrayLike, shadow_in: ArrayLike) -> NDArray[np.float64]:
    """Online LiRA log likelihood ratios, ``(N,)``, of median-centred confidences.

    Args:
        target: ``phi`` of the target model on the ``N`` candidates.
        shadow: ``phi`` of each of ``K`` shadow models on the same candidates, ``(K, N)``.
        shadow_in: ``(K, N)`` booleans, True where the candidate was in that shadow's training
            set. Every candidate needs at least one IN and one OUT shadow.
    """
    t = np.asarray(target, dtype=np.float64).reshape(-1)
    s = np.asarray(shadow, dtype=np.float64)
    m = np.asarray(shadow_in, dtype=bool)
    if s.ndim != 2 or s.shape != m.shape or s.shape[1] != t.size:
        raise ValueError(
            f"Arguments 'shadow' and 'shadow_in' must be (K, {t.size}), not {s.shape} and {m.shape}"
        )
    t = t - np.median(t)
    s = s - np.median(s, axis=1, keepdims=True)
    mu_in, ss_in, dof_in = _fit(s, m)
    mu_out, ss_out, dof_out = _fit(s, ~m)
    variance = max((ss_in + ss_out) / max(dof_in + dof_out, 1), 1e-12)
    return np.asarray((mu_in - mu_out) * (t - 0.5 * (mu_in + mu_out)) / variance)


def stack_confidences(per_model: Sequence[ArrayLike]) -> NDArray[np.float64]:
    """``(K, N)`` from ``K`` vectors of length ``N`` (shapes checked)."""
    rows = [np.asarray(r, dtype=np.float64).reshape(-1) for r in per_model]
    if not rows or any(r.size != rows[0].size for r in rows):
        raise ValueError("Argument 'per_model' must hold vectors of one length")
    return np.stack(rows)
