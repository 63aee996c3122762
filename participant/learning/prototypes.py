"""Prototype classification for ``protopfl-*`` strategies, and the prototype block they share.

Shapes: ``B`` images, ``C`` classes, ``d`` the image embedding width.

* **Adapter** (what is trained besides the local prompt): ``h = z + z W^T`` with ``W (d, d)``
  initialised to zero, so ``h = z`` (the frozen encoder's L2-normalized feature) at start.
* **Combination rule** (:func:`combined_logits`): with ``s = exp(logit_scale)``, clip
  threshold ``R``, text features ``t_c`` (unit, from the participant's prompt) and global
  prototypes ``P_c`` of its cluster,
  ``logit_c = s * [(1 - w) (h/R) . t_c + w (h/R) . P_c/||P_c||]``; a class no cluster member
  holds (no prototype yet) uses ``t_c`` in place of ``P_c/||P_c||``. At ``h = z``, ``R = 1``
  and ``w = 0`` this is CLIP's zero-shot logit ``s cos(z, t_c)``. The feature is divided by
  ``R`` instead of normalized so that its norm matters, as for the paper's linear heads:
  that is what DCR's soft clipping acts on.
* **Soft clipping** (DCR, eq. 15): ``h^ = R h / (||h|| + gamma R)``.
* **Distillation** (DCR, eq. 17): ``KL(softmax(y_t / tau) || softmax(y_s / tau))``.
* **Prototype block** (what secure aggregation sums): ``(C, d + 1)`` float64, row ``c`` =
  ``[w_c p~_c, w_c]`` with ``w_c = min(n_c, cap) / cap`` (``cap`` public), zero for absent
  classes. Summed (or averaged) over a cluster, row ``c`` gives the count-weighted mean
  ``P_c = sum_i w_ic p~_ic / sum_i w_ic`` (:func:`decode_block`).
"""

from __future__ import annotations

import numpy as np
import torch
from numpy.typing import NDArray
from torch import nn
from torch.nn.functional import kl_div, log_softmax, softmax

from secfpp.participant.learning.errors import LearningConfigError

__all__ = [
    "ResidualAdapter",
    "combined_logits",
    "decode_block",
    "distillation_loss",
    "encode_block",
    "soft_clip",
]


class ResidualAdapter(nn.Module):
    """``h = z + z W^T``, ``W (d, d)`` zero at start (identity map)."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.zeros(dim, dim))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        """``(B, d) -> (B, d)``."""
        z = z.float()
        return z + z @ self.weight.T


def soft_clip(h: torch.Tensor, bound: float, gamma: float) -> torch.Tensor:
    """``R h / (||h|| + gamma R)`` per row (eq. 15); ``||h^|| < R`` always, ``-> R`` as ``||h||``
    grows; differentiable everywhere."""
    clipped: torch.Tensor = bound * h / (h.norm(dim=1, keepdim=True) + gamma * bound)
    return clipped


def combined_logits(
    h: torch.Tensor,
    text: torch.Tensor,
    prototypes: torch.Tensor,
    present: torch.Tensor,
    *,
    scale: torch.Tensor | float,
    weight: float,
    bound: float,
) -> torch.Tensor:
    """The combination rule of the module docstring: ``(B, d), (C, d), (C, d), (C,) -> (B, C)``."""
    if not 0.0 <= weight <= 1.0:
        raise LearningConfigError("weight", f"must be in [0, 1], not {weight}")
    f = h.float() / bound
    unit = prototypes.float() / prototypes.float().norm(dim=1, keepdim=True).clamp_min(1e-12)
    directions = torch.where(present[:, None], unit, text.float())
    return scale * ((1.0 - weight) * (f @ text.float().T) + weight * (f @ directions.T))


def distillation_loss(teacher: torch.Tensor, student: torch.Tensor, tau: float) -> torch.Tensor:
    """``KL(softmax(teacher/tau) || softmax(student/tau))``, mean over the batch (eq. 17)."""
    return kl_div(
        log_softmax(student / tau, dim=1), softmax(teacher / tau, dim=1), reduction="batchmean"
    )


def encode_block(
    noisy_means: NDArray[np.float64], counts: NDArray[np.int64], *, cap: int
) -> NDArray[np.float64]:
    """``(C, d), (C,) -> (C, d + 1)`` rows ``[w_c p~_c, w_c]``, ``w_c = min(n_c, cap)/cap``."""
    n = np.asarray(counts, dtype=np.int64)
    if cap < 1:
        raise LearningConfigError("count_cap", f"must be >= 1, not {cap}")
    weights = np.minimum(n, cap).astype(np.float64) / cap
    p = np.where((n > 0)[:, None], np.asarray(noisy_means, dtype=np.float64), 0.0)
    return np.concatenate([weights[:, None] * p, weights[:, None]], axis=1)


def decode_block(
    block: NDArray[np.float64], n_classes: int, dim: int
) -> tuple[NDArray[np.float64], NDArray[np.bool_]]:
    """Global prototypes ``(C, d)`` and which classes have one ``(C,)`` from a summed or
    averaged block (any positive multiple of the sum gives the same prototypes)."""
    b = np.asarray(block, dtype=np.float64).reshape(-1)
    if b.size != n_classes * (dim + 1) or not np.all(np.isfinite(b)):
        raise LearningConfigError(
            "global_prototypes",
            f"must hold {n_classes} x {dim + 1} finite values (class sums and weights), "
            f"not {b.size} values",
        )
    rows = b.reshape(n_classes, dim + 1)
    weights = rows[:, dim]
    present = weights > 0
    prototypes = np.zeros((n_classes, dim))
    prototypes[present] = rows[present, :dim] / weights[present, None]
    return prototypes, present
