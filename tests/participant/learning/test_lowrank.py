"""DP-FPL's equations (seed 000): factorization, gradient reconstruction (eq. 4), LDP noise."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from secfpp.crypto.rng import DeterministicRandom
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.strategies.lowrank import (
    LowRank,
    orthonormalize,
    power_factorize,
    privatize_gradient,
    reconstruct_gradient,
)

M, N = 16, 32  # n_ctx x d


def _random(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _factorize(local: torch.Tensor, rank: int, seed: int = 1) -> LowRank:
    return power_factorize(local, rank, _random(local.shape[1], rank, seed=seed))


def test_orthonormalize_matches_gram_schmidt() -> None:
    a = _random(M, 4)
    q = orthonormalize(a)
    torch.testing.assert_close(q.T @ q, torch.eye(4, dtype=torch.float64))
    # Gram-Schmidt on the columns in order: first column is a_1 / |a_1|.
    torch.testing.assert_close(q[:, 0], a[:, 0] / a[:, 0].norm())


@pytest.mark.parametrize("rank", [1, 4, M])
def test_factors_are_orthonormal_and_sum_back_to_the_local_prompt(rank: int) -> None:
    local, glob = _random(M, N, seed=2), _random(M, N, seed=3)
    u, v, residual = _factorize(local, rank)
    assert u.shape == (M, rank)
    assert v.shape == (rank, N)
    assert residual.shape == (M, N)
    torch.testing.assert_close(u.T @ u, torch.eye(rank, dtype=torch.float64))
    torch.testing.assert_close(v @ v.T, torch.eye(rank, dtype=torch.float64))
    torch.testing.assert_close(u @ v + residual, local, rtol=0, atol=1e-12)
    torch.testing.assert_close(glob + u @ v + residual, glob + local, rtol=0, atol=1e-12)


def test_one_power_iteration_captures_a_low_rank_prompt() -> None:
    # For an exactly rank-k L, u spans its column space and the residual is u v's complement.
    local = _random(M, 3, seed=4) @ _random(3, N, seed=5)
    u, _, _ = _factorize(local, 3)
    projector = u @ u.T
    torch.testing.assert_close(projector @ local, local, rtol=0, atol=1e-10)


def test_eq4_against_the_formula_on_random_matrices() -> None:
    rng = np.random.default_rng(7)
    u = np.linalg.qr(rng.standard_normal((M, 4)))[0]
    v = np.linalg.qr(rng.standard_normal((N, 4)))[0].T
    grad_u, grad_v = rng.standard_normal((M, 4)), rng.standard_normal((4, N))
    expected = grad_u @ v + u @ grad_v - u @ u.T @ grad_u @ v
    got = reconstruct_gradient(*(torch.from_numpy(a) for a in (grad_u, grad_v, u, v)))
    np.testing.assert_allclose(got.numpy(), expected, rtol=1e-12, atol=1e-12)


def _loss(prompt: torch.Tensor) -> torch.Tensor:
    """A smooth, non-linear function of the prompt (stands in for the CLIP loss)."""
    weights = _random(M, N, seed=11)
    return (torch.tanh(prompt) * weights).sum() + 0.5 * (prompt**2).sum()


def _autograd(glob: torch.Tensor, local: torch.Tensor, rank: int) -> tuple[torch.Tensor, ...]:
    """Gradients of the loss w.r.t. u, v (through P = G + u v + r) and w.r.t. P itself."""
    u, v, residual = _factorize(local, rank)
    u.requires_grad_(True)
    v.requires_grad_(True)
    _loss(glob + u @ v + residual).backward()  # type: ignore[no-untyped-call]
    prompt = (glob + local).clone().requires_grad_(True)
    _loss(prompt).backward()  # type: ignore[no-untyped-call]
    assert u.grad is not None
    assert v.grad is not None
    assert prompt.grad is not None
    return u.detach(), v.detach(), u.grad, v.grad, prompt.grad


def test_eq4_is_the_tangent_projection_of_the_autograd_gradient() -> None:
    u, v, grad_u, grad_v, grad_p = _autograd(_random(M, N, seed=2), _random(M, N, seed=3), 4)
    # Chain rule through P = G + u v + r.
    torch.testing.assert_close(grad_u, grad_p @ v.T)
    torch.testing.assert_close(grad_v, u.T @ grad_p)
    p_u, p_v = u @ u.T, v.T @ v
    projected = p_u @ grad_p + grad_p @ p_v - p_u @ grad_p @ p_v
    torch.testing.assert_close(reconstruct_gradient(grad_u, grad_v, u, v), projected)
    # ... which is grad_P minus its part outside both subspaces.
    eye_m, eye_n = torch.eye(M, dtype=torch.float64), torch.eye(N, dtype=torch.float64)
    outside = (eye_m - p_u) @ grad_p @ (eye_n - p_v)
    torch.testing.assert_close(reconstruct_gradient(grad_u, grad_v, u, v), grad_p - outside)


def test_eq4_is_exact_at_full_rank() -> None:
    u, v, grad_u, grad_v, grad_p = _autograd(_random(M, N, seed=2), _random(M, N, seed=3), M)
    torch.testing.assert_close(reconstruct_gradient(grad_u, grad_v, u, v), grad_p)


def test_eq4_keeps_gradients_in_the_tangent_space() -> None:
    # grad_P = u A + B v lies in the tangent space at u v; the paper's minus sign keeps it
    # unchanged (adding the last term instead, as DP-FPL's code does, would not).
    u, v, _ = _factorize(_random(M, N, seed=2), 4)
    grad_p = u @ _random(4, N, seed=8) + _random(M, 4, seed=9) @ v
    grad_u, grad_v = grad_p @ v.T, u.T @ grad_p
    torch.testing.assert_close(reconstruct_gradient(grad_u, grad_v, u, v), grad_p)
    plus_sign = grad_u @ v + u @ grad_v + u @ u.T @ grad_u @ v
    assert not torch.allclose(plus_sign, grad_p)


def test_rank_out_of_range_is_refused() -> None:
    with pytest.raises(LearningConfigError, match="'rank' must be in \\[1, 16\\]"):
        power_factorize(_random(M, N), 17, _random(N, 17))


def test_ldp_noise_has_the_calibrated_scale() -> None:
    # n = 16*8 + 8*32 = 384 entries per step, 20 steps: n = 7680 samples of N(0, (zC)^2).
    # The sample std's relative standard error is 1/sqrt(2n) = 0.8%; we allow 4% (5 SE),
    # and the mean within 5 SE = 5 * zC / sqrt(n).
    clip_norm, noise_multiplier = 0.7, 1.5
    rng = DeterministicRandom(b"ldp-scale")
    noise = []
    for _ in range(20):
        for shape in ((16, 8), (8, 32)):
            zero = torch.zeros(shape, dtype=torch.float32)
            out = privatize_gradient(
                zero, clip_norm=clip_norm, noise_multiplier=noise_multiplier, rng=rng
            )
            assert out.shape == zero.shape
            assert out.dtype == zero.dtype
            noise.append(out.double().reshape(-1))
    samples = torch.cat(noise).numpy()
    sigma = noise_multiplier * clip_norm
    assert samples.size == 7680
    assert abs(samples.std() / sigma - 1.0) < 0.04
    assert abs(samples.mean()) < 5 * sigma / np.sqrt(samples.size)


def test_gradient_is_clipped_before_noise() -> None:
    big = torch.full((8, 32), 10.0)
    clipped = privatize_gradient(
        big, clip_norm=0.5, noise_multiplier=0.0, rng=DeterministicRandom(0)
    )
    assert float(clipped.norm()) == pytest.approx(0.5)
    torch.testing.assert_close(clipped / clipped.norm(), big / big.norm())


def test_noise_comes_from_the_injected_source() -> None:
    grad = _random(8, 32).float()
    first = privatize_gradient(
        grad, clip_norm=1.0, noise_multiplier=1.0, rng=DeterministicRandom(3)
    )
    again = privatize_gradient(
        grad, clip_norm=1.0, noise_multiplier=1.0, rng=DeterministicRandom(3)
    )
    other = privatize_gradient(
        grad, clip_norm=1.0, noise_multiplier=1.0, rng=DeterministicRandom(4)
    )
    torch.testing.assert_close(first, again)
    assert not torch.allclose(first, other)
