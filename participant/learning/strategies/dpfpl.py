"""DP-FPL (seed 000, Algorithm 1): global prompt + low-rank/residual local prompt with LDP.

Per step, with the local prompt ``L`` factorized afresh (:func:`power_factorize`, one power
iteration at rank ``k``) as ``L = u v + r``:

1. forward with ``P = G + u v + r`` (equal to ``G + L`` in value), back-propagate to ``G``,
   ``u`` and ``v``;
2. clip ``grad_G``, ``grad_u``, ``grad_v`` each to L2 norm ``C`` (line 9);
3. add ``N(0, (z_L C)^2)`` to ``grad_u`` and ``grad_v`` with :mod:`crypto.dp` and the injected
   :class:`~crypto.rng.RandomSource` (line 10); the residual gets no noise and no gradient;
4. rebuild ``grad_L`` by eq. (4) from the noisy gradients (line 11), step ``G`` and ``L``.

The round's update ``g_i = G_after - G_before`` is clipped to L2 norm ``update_clip_norm``
before it leaves, so the coordinator's GDP release on the cluster mean has sensitivity
``update_clip_norm / m``; the coordinator adds noise of std ``z_G update_clip_norm / m``
(:func:`crypto.dp.gdp_sigma`) with the parameters from :meth:`DpFplStrategy.gdp_parameters`.
That noise is a discrete Gaussian drawn exactly on the decoded integer sum (quantization grid,
:func:`crypto.aggregation.decode_cluster_mean`), and the uploaded ``g_i`` is re-clipped so that
its *quantized* norm obeys the federation's clip (:func:`crypto.aggregation.quantize_update`).
Each step is two LDP Gaussian releases (``grad_u`` and ``grad_v``), each of sensitivity ``C``
and noise multiplier ``z_L`` (:meth:`DpFplStrategy.ldp_parameters`), for the privacy ledger;
that noise is floating-point on purpose (see :func:`crypto.dp.ldp_noisy_gradient`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import torch
from numpy.typing import NDArray
from torch.nn.functional import cross_entropy

from secfpp.crypto.dp import clip_l2
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.strategies.base import Strategy, StrategyConfig
from secfpp.participant.learning.strategies.lowrank import (
    power_factorize,
    privatize_gradient,
    reconstruct_gradient,
)

__all__ = ["DpFplConfig", "DpFplStrategy", "GdpParameters", "LdpParameters"]


@dataclass(frozen=True)
class DpFplConfig(StrategyConfig):
    """DP-FPL settings on top of :class:`StrategyConfig`.

    ``rank``: ``k`` of the factorization (``1 <= k <= min(n_ctx, d)``); ``clip_norm``: per-step
    L2 clip ``C`` of ``grad_G``, ``grad_u``, ``grad_v``; ``noise_multiplier``: ``z_L`` (LDP std
    ``z_L C``; 0 disables the noise); ``global_noise_multiplier``: ``z_G`` for the coordinator's
    GDP; ``update_clip_norm``: L2 clip of the uploaded ``g_i``.
    """

    rank: int = 8
    clip_norm: float = 1.0
    noise_multiplier: float = 1.0
    global_noise_multiplier: float = 1.0
    update_clip_norm: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        self._check_int("rank", 1)
        self._check_real("clip_norm", low=0.0, open_low=True)
        self._check_real("noise_multiplier", low=0.0)
        self._check_real("global_noise_multiplier", low=0.0)
        self._check_real("update_clip_norm", low=0.0, open_low=True)


@dataclass(frozen=True)
class GdpParameters:
    """What the coordinator needs to noise a cluster mean of DP-FPL updates (DESIGN.md 8)."""

    clip_norm: float
    noise_multiplier: float


@dataclass(frozen=True)
class LdpParameters:
    """The participant's per-step LDP releases, for the privacy ledger."""

    clip_norm: float
    noise_multiplier: float
    releases_per_step: int = 2


class DpFplStrategy(Strategy):
    """Global prompt (GDP at the coordinator) + factorized local prompt (LDP on ``u``, ``v``)."""

    name: ClassVar[str] = "dpfpl"
    uploads_update: ClassVar[bool] = True
    use_global: ClassVar[bool] = True
    use_local: ClassVar[bool] = True
    config_type: ClassVar[type[StrategyConfig]] = DpFplConfig
    config: DpFplConfig

    def _setup(self) -> None:
        """Check that the rank ``k`` fits the prompt: ``1 <= k <= min(n_ctx, d)``."""
        limit = min(self.learner.n_ctx, self.learner.ctx_dim)
        if self.config.rank > limit:
            raise LearningConfigError(
                "rank", f"must be in [1, {limit}] (min of n_ctx and d), not {self.config.rank}"
            )

    def gdp_parameters(self) -> GdpParameters:
        """Clip norm of ``g_i`` and the noise multiplier ``z_G`` for the coordinator."""
        return GdpParameters(self.config.update_clip_norm, self.config.global_noise_multiplier)

    def ldp_parameters(self) -> LdpParameters:
        """Per-step LDP: two releases of sensitivity ``C`` and noise multiplier ``z_L``."""
        return LdpParameters(self.config.clip_norm, self.config.noise_multiplier)

    def step(
        self, optimizer: torch.optim.Optimizer, features: torch.Tensor, labels: torch.Tensor
    ) -> tuple[float, int]:
        """One DP-FPL step (Algorithm 1, lines 6-12)."""
        g, local = self.learner.global_ctx, self.learner.local_ctx
        if g is None or local is None:  # pragma: no cover - guaranteed by use_global/use_local
            raise LearningConfigError("strategy", "dpfpl needs both G and L")
        k, n = self.config.rank, self.learner.ctx_dim
        start = torch.from_numpy(self.rng.standard_normal((n, k)))  # (d, k) power-iteration start
        u, v, residual = power_factorize(local, k, start)  # (n_ctx, k), (k, d), (n_ctx, d)
        u.requires_grad_(True)
        v.requires_grad_(True)
        optimizer.zero_grad(set_to_none=True)
        logits = self.learner.logits(features, ctx=g + u @ v + residual)  # (B, n_cls)
        loss = cross_entropy(logits, labels)
        loss.backward()  # type: ignore[no-untyped-call]
        if g.grad is None or u.grad is None or v.grad is None:  # pragma: no cover
            raise LearningConfigError("strategy", "dpfpl step produced no gradient")
        with torch.no_grad():
            norm = float(g.grad.norm())
            if norm > self.config.clip_norm:
                g.grad.mul_(self.config.clip_norm / norm)
            noisy_u = privatize_gradient(
                u.grad,
                clip_norm=self.config.clip_norm,
                noise_multiplier=self.config.noise_multiplier,
                rng=self.rng,
            )
            noisy_v = privatize_gradient(
                v.grad,
                clip_norm=self.config.clip_norm,
                noise_multiplier=self.config.noise_multiplier,
                rng=self.rng,
            )
            local.grad = reconstruct_gradient(noisy_u, noisy_v, u.detach(), v.detach())
        optimizer.step()
        return float(loss.detach()), int((logits.detach().argmax(dim=1) == labels).sum())

    def _global_update(self) -> NDArray[np.float64]:
        """``g_i`` clipped to L2 norm ``update_clip_norm`` (the GDP sensitivity unit)."""
        update = super()._global_update()
        if not math.isfinite(float(np.linalg.norm(update))):
            raise LearningConfigError("global_update", "is not finite; lower lr or the noise")
        return clip_l2(update, self.config.update_clip_norm)
