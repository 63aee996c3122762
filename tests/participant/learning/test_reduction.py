"""SecPC reduction: every participant maps into the same coordinates."""

from __future__ import annotations

import numpy as np
import pytest

from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.reduction import (
    JLReduction,
    TokenPCAReduction,
    get_reduction,
    jl_matrix,
)


def test_same_public_seed_same_matrix() -> None:
    alice = get_reduction("jl", n_ctx=16, ctx_dim=32, seed=2024, r=64)
    bob = get_reduction("jl", n_ctx=16, ctx_dim=32, seed=2024, r=64)
    assert isinstance(alice, JLReduction)
    assert isinstance(bob, JLReduction)
    np.testing.assert_array_equal(alice.matrix, bob.matrix)
    assert alice.matrix.shape == (512, 64)
    prompt = np.random.default_rng(1).standard_normal((16, 32))
    np.testing.assert_array_equal(alice.reduce(prompt), bob.reduce(prompt.reshape(-1)))
    other = get_reduction("jl", n_ctx=16, ctx_dim=32, seed=2025, r=64)
    assert isinstance(other, JLReduction)
    assert not np.allclose(alice.matrix, other.matrix)


def test_jl_entries_have_variance_one_over_r() -> None:
    matrix = jl_matrix(512, 128, seed=0)
    assert abs(matrix.var() * 128 - 1.0) < 0.02  # 65 536 entries: SE of the variance 0.6%


def test_jl_roughly_preserves_distances() -> None:
    # With r = 128 the squared-distance ratio has relative std sqrt(2/r) = 0.125; over 45
    # pairs the mean ratio is within 0.1 of 1 and every ratio within [0.5, 1.6] (> 4 std).
    rng = np.random.default_rng(3)
    prompts = rng.standard_normal((10, 16 * 32))
    reduction = get_reduction("jl", n_ctx=16, ctx_dim=32, seed=7, r=128)
    reduced = np.stack([reduction.reduce(p) for p in prompts])
    ratios = [
        np.sum((reduced[i] - reduced[j]) ** 2) / np.sum((prompts[i] - prompts[j]) ** 2)
        for i in range(10)
        for j in range(i)
    ]
    assert abs(np.mean(ratios) - 1.0) < 0.1
    assert min(ratios) > 0.5
    assert max(ratios) < 1.6


def test_token_pca(tiny_backbone: Backbone) -> None:
    table = tiny_backbone.text.token_embedding.weight
    reduction = get_reduction("token-pca", n_ctx=4, ctx_dim=32, k=8, token_embedding=table)
    assert isinstance(reduction, TokenPCAReduction)
    assert reduction.r == 32
    directions = reduction.directions
    np.testing.assert_allclose(directions @ directions.T, np.eye(8), atol=1e-10)
    # Same table, same directions (and signs) for every participant.
    again = TokenPCAReduction(n_ctx=4, token_embedding=table.detach().numpy(), k=8)
    np.testing.assert_allclose(again.directions, directions, atol=1e-12)
    prompt = np.random.default_rng(0).standard_normal((4, 32))
    x = reduction.reduce(prompt)
    np.testing.assert_allclose(x.reshape(4, 8), prompt @ directions.T)


def test_token_pca_finds_the_dominant_direction() -> None:
    rng = np.random.default_rng(0)
    axis = np.zeros(6)
    axis[2] = 1.0
    table = rng.standard_normal((5000, 6)) * 0.1 + rng.standard_normal((5000, 1)) * 3.0 * axis
    reduction = TokenPCAReduction(n_ctx=2, token_embedding=table, k=1)
    np.testing.assert_allclose(reduction.directions[0], axis, atol=0.01)


def test_reduction_errors() -> None:
    with pytest.raises(LearningConfigError, match="'seed' is required"):
        get_reduction("jl", n_ctx=4, ctx_dim=32)
    with pytest.raises(LearningConfigError, match="'token_embedding' is required"):
        get_reduction("token-pca", n_ctx=4, ctx_dim=32)
    with pytest.raises(LearningConfigError, match="'method' must be 'jl' or 'token-pca'"):
        get_reduction("svd", n_ctx=4, ctx_dim=32, seed=1)
    with pytest.raises(LearningConfigError, match="'prompt' must have 128 entries"):
        get_reduction("jl", n_ctx=4, ctx_dim=32, seed=1).reduce(np.zeros(5))
