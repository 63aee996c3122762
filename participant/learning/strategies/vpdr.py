"""``protopfl-vpdr``: VPP release + DCR local training (seed 003, sections 4.2-4.3).

**VPP** (per round, on this round's adapter features ``h``): ANOVA scores, one-shot Laplace
top-``k`` selection of ``k = ceil(rho d)`` dims (``rho = select_fraction``, budget
``epsilon_1 = r epsilon``, ``r = select_budget_ratio``, scores capped at ``H = score_cap``),
groupwise clipping to ``R_A, R_B`` and groupwise Gaussian noise with ``sigma_A, sigma_B`` from
``sigma_ref`` calibrated to ``((1 - r) epsilon, delta)`` over ``rounds`` releases
(:mod:`crypto.dp.groupwise`). Total per participant: ``(epsilon, delta)``.

**DCR** (local training; what trains is the local prompt ``L`` and the adapter ``W``):
the student classifies the soft-clipped feature ``h^ = R h / (||h|| + gamma R)`` with the
current prompt; the teacher classifies the unclipped ``h`` with an EMA copy of the prompt
(``L_t <- beta L_t + (1 - beta) L`` after each step, no gradient to ``L_t``). Loss:
``CE(y_s, y) + lambda_1 KL(softmax(y_t / tau) || softmax(y_s / tau))``. The gradient of the KL
term reaches the adapter through both ``h^`` and ``h``; matching the two pulls ``||h||`` toward
the scale at which ``h^ ~ h``, i.e. toward ``R``. Prediction uses the student.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch.nn.functional import cross_entropy

from secfpp.crypto.dp.groupwise import (
    GroupwiseNoise,
    class_sums,
    discriminative_scores,
    effective_multiplier,
    gaussian_multiplier,
    groupwise_clip,
    groupwise_noise,
    laplace_scale,
    laplace_top_k,
    vpp_release,
)
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.prototypes import distillation_loss, soft_clip
from secfpp.participant.learning.strategies.base import StrategyConfig
from secfpp.participant.learning.strategies.protopfl import ProtoPflConfig, ProtoPflStrategy

__all__ = ["VpdrConfig", "VpdrStrategy"]


@dataclass(frozen=True)
class VpdrConfig(ProtoPflConfig):
    """VPDR settings on top of :class:`ProtoPflConfig` (paper defaults, section 5.1).

    ``select_fraction``: ``rho`` in (0, 0.5]; ``select_budget_ratio``: ``r`` in (0, 1);
    ``score_cap``: ``H``; ``score_zeta``: ``zeta`` of eq. (8); ``soft_clip_gamma``: ``gamma``
    in (0, 1); ``ema_momentum``: ``beta`` in [0, 1); ``kd_temperature``: ``tau``;
    ``kd_weight``: ``lambda_1``.
    """

    select_fraction: float = 0.2
    select_budget_ratio: float = 0.1
    score_cap: float = 0.1
    score_zeta: float = 1e-6
    soft_clip_gamma: float = 0.05
    ema_momentum: float = 0.999
    kd_temperature: float = 4.0
    kd_weight: float = 0.05

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_real("select_fraction", low=0.0, high=0.5, open_low=True)
        self._check_real("select_budget_ratio", low=0.0, high=1.0, open_low=True, open_high=True)
        self._check_real("score_cap", low=0.0, open_low=True)
        self._check_real("score_zeta", low=0.0, open_low=True)
        self._check_real("soft_clip_gamma", low=0.0, high=1.0, open_low=True, open_high=True)
        self._check_real("ema_momentum", low=0.0, high=1.0, open_high=True)
        self._check_real("kd_temperature", low=0.0, open_low=True)
        self._check_real("kd_weight", low=0.0)


class VpdrStrategy(ProtoPflStrategy):
    """Prototype sharing with VPP's groupwise LDP release and DCR's regularized training."""

    name: ClassVar[str] = "protopfl-vpdr"
    config_type: ClassVar[type[StrategyConfig]] = VpdrConfig
    config: VpdrConfig

    def _setup(self) -> None:
        """Two feature groups need ``d >= 2``; the EMA teacher starts at the current prompt."""
        super()._setup()
        if self.dim < 2:
            raise LearningConfigError("embed_dim", f"must be >= 2 for two groups, not {self.dim}")
        self.teacher = self.learner.context().detach().clone()  # (n_ctx, d_text), EMA of L
        self.selected: NDArray[np.int64] | None = None  # I_A of the last release

    # -- budget ------------------------------------------------------------------------------

    @property
    def d_a(self) -> int:
        """``k = d_A = ceil(rho d)`` (at most ``d - 1``)."""
        return min(self.dim - 1, max(1, math.ceil(self.config.select_fraction * self.dim)))

    @property
    def epsilon_select(self) -> float:
        """``epsilon_1 = r epsilon`` (all rounds)."""
        return self.config.select_budget_ratio * self.config.epsilon

    @cached_property
    def noise(self) -> GroupwiseNoise:
        """``sigma_ref`` at ``((1 - r) epsilon, delta)`` over ``rounds``; the group multipliers."""
        c = self.config
        sigma_ref = gaussian_multiplier(
            epsilon=c.epsilon - self.epsilon_select, delta=c.delta, rounds=c.rounds
        )
        return groupwise_noise(sigma_ref, self.d_a, self.dim)

    def gaussian_multiplier(self) -> float:
        return effective_multiplier(self.noise.sigma_a, self.noise.sigma_b)

    def selection_epsilon(self) -> float:
        return self.epsilon_select / self.config.rounds

    # -- release (VPP) -----------------------------------------------------------------------

    def privatize(
        self, h: NDArray[np.float64], labels: NDArray[np.int64]
    ) -> tuple[NDArray[np.float64], NDArray[np.int64]]:
        c = self.config
        scores = discriminative_scores(h, labels, self.learner.n_cls, zeta=c.score_zeta)
        scale = laplace_scale(
            k=self.d_a, score_cap=c.score_cap, epsilon=self.epsilon_select, rounds=c.rounds
        )
        self.selected = laplace_top_k(
            scores, k=self.d_a, score_cap=c.score_cap, scale=scale, rng=self.rng
        )
        clipped = groupwise_clip(h, self.selected, bound=c.clip)
        sums, counts = class_sums(clipped, labels, self.learner.n_cls)
        means = sums / np.maximum(counts, 1)[:, None]
        noisy = vpp_release(
            means, counts, self.selected, bound=c.clip, noise=self.noise, rng=self.rng
        )
        return noisy, counts

    # -- local training (DCR) ----------------------------------------------------------------

    def classify(self, features: torch.Tensor) -> torch.Tensor:
        """Student logits on the soft-clipped adapter features."""
        h = self.adapter(features)
        return self._logits(soft_clip(h, self.config.clip, self.config.soft_clip_gamma))

    def step(
        self, optimizer: torch.optim.Optimizer, features: torch.Tensor, labels: torch.Tensor
    ) -> tuple[float, int]:
        c = self.config
        optimizer.zero_grad(set_to_none=True)
        h = self.adapter(features)
        student = self._logits(soft_clip(h, c.clip, c.soft_clip_gamma))
        with torch.no_grad():
            teacher_text = self.learner.text_features(self.teacher.to(h.device))
        teacher = self._logits(h, text=teacher_text)
        task = cross_entropy(student, labels)
        loss = task + c.kd_weight * distillation_loss(teacher, student, c.kd_temperature)
        loss.backward()  # type: ignore[no-untyped-call]
        optimizer.step()
        with torch.no_grad():
            self.teacher.mul_(c.ema_momentum).add_(
                self.learner.context().detach(), alpha=1.0 - c.ema_momentum
            )
        return float(task.detach()), int((student.detach().argmax(dim=1) == labels).sum())

    # -- persistence -------------------------------------------------------------------------

    def state(self) -> dict[str, NDArray[np.float64]]:
        return {**super().state(), "teacher": self.teacher.double().cpu().numpy()}

    def load_state(self, state: dict[str, NDArray[Any]]) -> None:
        super().load_state(state)  # checks the keys, "teacher" included
        teacher = torch.as_tensor(np.asarray(state["teacher"]), dtype=self.teacher.dtype)
        if teacher.shape != self.teacher.shape:
            raise LearningConfigError("state.teacher", f"must be {tuple(self.teacher.shape)}")
        self.teacher = teacher.to(self.teacher.device)
