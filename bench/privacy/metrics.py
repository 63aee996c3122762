"""Scores of a membership attack: ROC AUC and the true-positive rate at a low false-positive rate.

An attack gives every candidate example a real score (higher: "more likely a member"). With
``m`` members and ``n`` non-members,

* ``AUC = P(score(member) > score(non-member)) + 1/2 P(equal)`` (the Mann-Whitney statistic
  divided by ``m n``); 0.5 is guessing;
* ``TPR@FPR=a`` is the largest fraction of members flagged by a threshold that flags at most a
  fraction ``a`` of the non-members (the low-FPR regime of Carlini et al., "Membership Inference
  Attacks From First Principles", 2022). Guessing gives ``a``.

Both are exact functions of the scores (no interpolation), so tests can check them by hand.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray
from scipy.stats import rankdata

__all__ = ["AttackScore", "attack_score", "auc_standard_error", "roc_auc", "tpr_at_fpr"]


def _split(
    scores: ArrayLike, is_member: ArrayLike
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    s = np.asarray(scores, dtype=np.float64).reshape(-1)
    m = np.asarray(is_member, dtype=bool).reshape(-1)
    if s.shape != m.shape:
        raise ValueError(
            f"Arguments 'scores' and 'is_member' must have the same length, not {s.size} and "
            f"{m.size}"
        )
    if not np.all(np.isfinite(s)):
        raise ValueError("Argument 'scores' must be finite")
    if m.all() or not m.any():
        raise ValueError("Argument 'is_member' must hold at least one member and one non-member")
    return s, m


def roc_auc(scores: ArrayLike, is_member: ArrayLike) -> float:
    """Area under the ROC curve, ties counted one half (Mann-Whitney ``U / (m n)``)."""
    s, m = _split(scores, is_member)
    ranks = rankdata(s)  # average ranks for ties
    n_pos, n_neg = int(m.sum()), int((~m).sum())
    u = float(ranks[m].sum()) - n_pos * (n_pos + 1) / 2.0
    return u / (n_pos * n_neg)


def tpr_at_fpr(scores: ArrayLike, is_member: ArrayLike, fpr: float = 0.01) -> float:
    """Largest TPR over thresholds ``t`` (flag ``score >= t``) with FPR ``<= fpr``.

    ``fpr`` must be in ``[0, 1]``. With ``n`` non-members the achievable FPRs are ``k / n``, so a
    1% FPR needs ``n >= 100`` to mean what it says; :func:`attack_score` reports ``n``.
    """
    if not 0.0 <= fpr <= 1.0:
        raise ValueError(f"Argument 'fpr' must be in [0, 1], not {fpr}")
    s, m = _split(scores, is_member)
    pos, neg = np.sort(s[m]), np.sort(s[~m])
    n_neg = neg.size
    allowed = math.floor(fpr * n_neg + 1e-9)  # non-members that may be flagged
    if allowed >= n_neg:
        return 1.0
    # The threshold must exceed the (allowed+1)-th largest non-member score.
    bound = neg[n_neg - 1 - allowed]
    return float((pos > bound).sum()) / pos.size


def auc_standard_error(auc: float, members: int, non_members: int) -> float:
    """Hanley and McNeil's (1982) standard error of an AUC from ``members`` and ``non_members``.

    ``se^2 = (A(1-A) + (m-1)(Q1 - A^2) + (n-1)(Q2 - A^2)) / (m n)`` with ``Q1 = A / (2 - A)``,
    ``Q2 = 2 A^2 / (1 + A)``; at ``A = 0.5``, about ``sqrt((m + n + 1) / (12 m n))``.
    """
    if members < 1 or non_members < 1 or not 0.0 <= auc <= 1.0:
        raise ValueError(
            f"Arguments must be counts >= 1 and an AUC in [0, 1], not {members}, {non_members}, "
            f"{auc}"
        )
    q1, q2 = auc / (2.0 - auc), 2.0 * auc**2 / (1.0 + auc)
    var = (
        auc * (1.0 - auc) + (members - 1) * (q1 - auc**2) + (non_members - 1) * (q2 - auc**2)
    ) / (members * non_members)
    return math.sqrt(max(var, 0.0))


@dataclass(frozen=True)
class AttackScore:
    """AUC and TPR at 1% FPR of one attack on a pooled candidate set."""

    auc: float
    tpr_at_1pct_fpr: float
    members: int
    non_members: int

    @property
    def auc_se(self) -> float:
        """Hanley-McNeil standard error of :attr:`auc`."""
        return auc_standard_error(self.auc, self.members, self.non_members)

    def as_dict(self) -> dict[str, float | int]:
        return {
            "auc": self.auc,
            "auc_se": self.auc_se,
            "tpr_at_1pct_fpr": self.tpr_at_1pct_fpr,
            "members": self.members,
            "non_members": self.non_members,
        }


def attack_score(scores: ArrayLike, is_member: ArrayLike) -> AttackScore:
    """:func:`roc_auc` and :func:`tpr_at_fpr` at 1%, with the class counts."""
    s, m = _split(scores, is_member)
    return AttackScore(roc_auc(s, m), tpr_at_fpr(s, m, 0.01), int(m.sum()), int((~m).sum()))
