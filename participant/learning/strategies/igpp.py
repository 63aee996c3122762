"""``protopfl-igpp``: Isotropic Gaussian Prototype Perturbation (seed 003, eq. 4-6), the baseline.

Per round: clip each adapter feature to L2 norm ``R``; class means ``p_c``; release
``p~_c = p_c + N(0, (sigma_iso 2R/n_c)^2 I_d)`` with ``sigma_iso`` the exact multiplier for
``rounds`` Gaussian releases at the full budget ``(epsilon, delta)``
(:func:`crypto.dp.groupwise.gaussian_multiplier`). Local training: cross-entropy of the
combination rule on the adapter's features (no soft clipping, no distillation).
"""

from __future__ import annotations

from functools import cached_property
from typing import ClassVar

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.dp.groupwise import class_sums, clip_rows, gaussian_multiplier, isotropic_release
from secfpp.participant.learning.strategies.protopfl import ProtoPflStrategy

__all__ = ["IgppStrategy"]


class IgppStrategy(ProtoPflStrategy):
    """Prototype sharing with per-example L2 clipping and isotropic Gaussian LDP noise."""

    name: ClassVar[str] = "protopfl-igpp"

    @cached_property
    def sigma_iso(self) -> float:
        """``sigma_iso``: ``rounds`` releases of this multiplier are ``(epsilon, delta)``-DP."""
        c = self.config
        return gaussian_multiplier(epsilon=c.epsilon, delta=c.delta, rounds=c.rounds)

    def gaussian_multiplier(self) -> float:
        return self.sigma_iso

    def privatize(
        self, h: NDArray[np.float64], labels: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        clipped = clip_rows(h, self.config.clip)
        sums, counts = class_sums(clipped, labels, self.learner.n_cls)
        means = sums / np.maximum(counts, 1)[:, None]
        noisy = isotropic_release(
            means, counts, bound=self.config.clip, sigma=self.sigma_iso, rng=self.rng
        )
        return noisy, counts
