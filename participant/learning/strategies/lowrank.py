"""DP-FPL's low-rank + residual factorization of the local prompt (seed 000, section 3.2).

Every training step the local prompt ``L`` (``m x n`` = ``n_ctx x d``) is factorized with ONE
power iteration at rank ``k`` (RGP, Yu et al. 2021, as in DP-FPL's code)::

    u = orth(L @ Omega)        Omega ~ N(0, 1), n x k;  u: m x k, orthonormal columns
    v = orth(L^T @ u)^T        v: k x n, orthonormal rows
    r = L - u @ v              residual, m x n (not a gradient carrier, never noised)

so ``u @ v + r == L`` in value and the prompt is ``P = G + u v + r``. Back-propagation gives
``grad_u = grad_P v^T`` and ``grad_v = u^T grad_P``; after clipping and noising them, the local
prompt's gradient is rebuilt by DP-FPL eq. (4)::

    grad_L = grad_u v + u grad_v - u u^T grad_u v

With ``u``, ``v`` orthonormal this is ``P_u grad_P + grad_P P_v - P_u grad_P P_v`` (``P_u = u u^T``,
``P_v = v^T v``): the projection of the true gradient onto the tangent space of the rank-``k``
matrices at ``u v``; it equals ``grad_P`` when ``k = m``. (DP-FPL's public code adds the last term
instead of subtracting it; the paper's minus sign is the one that gives this projection.)
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np
import torch

from secfpp.crypto.dp import clip_l2, ldp_noisy_gradient
from secfpp.crypto.rng import RandomSource
from secfpp.participant.learning.errors import LearningConfigError

__all__ = [
    "LowRank",
    "orthonormalize",
    "power_factorize",
    "privatize_gradient",
    "reconstruct_gradient",
]


class LowRank(NamedTuple):
    """``L = u v + residual``: ``u`` ``m x k``, ``v`` ``k x n``, ``residual`` ``m x n``."""

    u: torch.Tensor
    v: torch.Tensor
    residual: torch.Tensor


def orthonormalize(matrix: torch.Tensor) -> torch.Tensor:
    """Orthonormal columns spanning those of ``matrix`` (``m x k``, ``k <= m``).

    Reduced QR with the signs fixed so ``R`` has a non-negative diagonal: the same result as
    Gram-Schmidt on the columns in order.
    """
    q, r = torch.linalg.qr(matrix, mode="reduced")
    signs = torch.sign(torch.diagonal(r))
    signs = torch.where(signs == 0, torch.ones_like(signs), signs)
    result: torch.Tensor = q * signs.unsqueeze(0)
    return result


def power_factorize(local: torch.Tensor, rank: int, start: torch.Tensor) -> LowRank:
    """One power iteration at rank ``k`` from the ``n x k`` start matrix ``start``.

    ``local``: ``m x n``. Returns detached ``u`` (``m x k``), ``v`` (``k x n``) and the residual.
    """
    m, n = local.shape
    if not 1 <= rank <= min(m, n):
        raise LearningConfigError("rank", f"must be in [1, {min(m, n)}], not {rank}")
    if tuple(start.shape) != (n, rank):
        raise LearningConfigError(
            "start", f"must have shape ({n}, {rank}), not {tuple(start.shape)}"
        )
    with torch.no_grad():
        matrix = local.detach()
        u = orthonormalize(matrix @ start.to(matrix))  # (m, k)
        v = orthonormalize(matrix.T @ u).T  # (k, n)
        residual = matrix - u @ v  # (m, n)
    return LowRank(u, v, residual)


def reconstruct_gradient(
    grad_u: torch.Tensor, grad_v: torch.Tensor, u: torch.Tensor, v: torch.Tensor
) -> torch.Tensor:
    """DP-FPL eq. (4): ``grad_u v + u grad_v - u u^T grad_u v`` (``m x n``)."""
    grad_u_v = grad_u @ v  # (m, n)
    return grad_u_v + u @ grad_v - u @ (u.T @ grad_u_v)


def privatize_gradient(
    gradient: torch.Tensor,
    *,
    clip_norm: float,
    noise_multiplier: float,
    rng: RandomSource,
) -> torch.Tensor:
    """``clip_l2(grad, C) + N(0, (z C)^2)`` per entry via :mod:`crypto.dp`; ``z = 0``: clip only.

    The noise comes from ``rng`` (never torch's generator); the result has ``gradient``'s shape,
    dtype and device. It is floating-point (Box-Muller), not the discrete sampler: the noisy
    gradient stays inside local training and is never shared or published as such, see
    :func:`crypto.dp.ldp_noisy_gradient` for why that is acceptable and what it does not prove.
    """
    array = gradient.detach().cpu().double().numpy()
    if noise_multiplier == 0.0:
        noised = clip_l2(array, clip_norm)
    else:
        noised = ldp_noisy_gradient(
            array, clip_norm=clip_norm, noise_multiplier=noise_multiplier, rng=rng
        )
    return torch.from_numpy(np.ascontiguousarray(noised)).to(gradient)
