"""Each strategy runs a round on the tiny backbone and hands back the right things."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from secfpp.crypto.rng import DeterministicRandom
from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.data import read_image_folder
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.features import FeatureCache, FeatureSet
from secfpp.participant.learning.prompt_learner import PromptLearner
from secfpp.participant.learning.strategies import (
    STRATEGIES,
    DpFplStrategy,
    GdpParameters,
    Strategy,
    get_strategy,
)

N_CTX, D = 4, 32
SMALL = {"n_ctx": N_CTX, "batch_size": 6, "lr": 0.01}


@pytest.fixture
def toy_features(toy_folder: Path, tiny_backbone: Backbone, tmp_path: Path) -> FeatureSet:
    dataset = read_image_folder(toy_folder, transform=tiny_backbone.preprocess)
    return FeatureCache(tmp_path / "cache").get(tiny_backbone, dataset)


def _strategy(
    name: str, backbone: Backbone, classnames: tuple[str, ...], **extra: object
) -> Strategy:
    settings = {**SMALL, **({"rank": 2} if name == "dpfpl" else {}), **extra}
    return get_strategy(
        name, backbone=backbone, classnames=classnames, rng=DeterministicRandom(name), **settings
    )


@pytest.mark.parametrize("name", sorted(STRATEGIES))
def test_round_returns_update_and_prompt_of_the_right_shape(
    name: str, tiny_backbone: Backbone, toy_features: FeatureSet
) -> None:
    strategy = _strategy(name, tiny_backbone, toy_features.classnames)
    glob = None
    if strategy.use_global:
        glob = np.random.default_rng(0).normal(0, 0.02, size=(N_CTX, D))
    strategy.begin_round(glob)
    out = strategy.train_round(toy_features.features, toy_features.labels, epochs=2)
    assert out.prompt.shape == (N_CTX * D,)
    assert out.prompt.dtype == np.float64
    assert out.metrics.steps == 6
    assert out.metrics.samples == 36
    assert 0.0 <= out.metrics.train_accuracy <= 1.0
    if strategy.uploads_update:
        assert out.global_update is not None
        assert out.global_update.shape == (N_CTX * D,)
        assert out.global_update.dtype == np.float64
        assert glob is not None
        after = strategy.learner.get_global()
        np.testing.assert_allclose(out.global_update, (after - glob).reshape(-1), atol=1e-6)
        assert np.abs(out.global_update).max() > 0
    else:
        assert out.global_update is None
    state = strategy.state()
    # the prompt is global + local; other state entries (adapter, prototypes, teacher) are not
    expected_prompt = state.get("global", 0) + state.get("local", 0)
    np.testing.assert_allclose(out.prompt, np.asarray(expected_prompt).reshape(-1), atol=1e-6)


def test_strategy_flags() -> None:
    flags = {
        n: (c.uploads_update, c.clustered, c.use_global, c.use_local) for n, c in STRATEGIES.items()
    }
    assert flags == {
        "secfpp": (True, True, True, True),
        "promptfl": (True, False, True, False),
        "dpfpl": (True, False, True, True),
        "local": (False, False, False, True),
        "feddpa": (True, False, True, False),
        "protopfl-igpp": (False, False, False, True),
        "protopfl-vpdr": (False, False, False, True),
    }


def test_secfpp_training_reduces_the_loss_on_toy_images(
    tiny_backbone: Backbone, toy_features: FeatureSet
) -> None:
    strategy = _strategy("secfpp", tiny_backbone, toy_features.classnames, lr=0.05)
    first = strategy.train_round(toy_features.features, toy_features.labels, epochs=1)
    later = strategy.train_round(toy_features.features, toy_features.labels, epochs=4)
    assert later.metrics.last_loss < first.metrics.first_loss


def test_context_gradient_matches_finite_differences(
    tiny_backbone: Backbone, toy_features: FeatureSet
) -> None:
    # The untrained tiny backbone cannot show real learning (its image features barely
    # separate the colours, so training mostly equalizes the logits); this checks instead that
    # the gradient reaching the context through the whole text encoder is the true one.
    learner = PromptLearner(tiny_backbone, toy_features.classnames, n_ctx=N_CTX, seed=3)
    features, labels = toy_features.features, toy_features.labels

    def loss(ctx: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.cross_entropy(learner.logits(features, ctx=ctx), labels)

    ctx = learner.context().detach().clone().requires_grad_(True)
    loss(ctx).backward()  # type: ignore[no-untyped-call]
    assert ctx.grad is not None
    direction = torch.randn(N_CTX, D, generator=torch.Generator().manual_seed(1))
    direction /= direction.norm()
    h = 1e-2
    with torch.no_grad():
        numeric = (loss(ctx + h * direction) - loss(ctx - h * direction)) / (2 * h)
    analytic = (ctx.grad * direction).sum()
    assert float(analytic.abs()) > 1e-3
    assert float(numeric) == pytest.approx(float(analytic), rel=0.02)


def test_begin_round_installs_the_global_prompt(tiny_backbone: Backbone) -> None:
    strategy = _strategy("promptfl", tiny_backbone, ("a", "b"))
    glob = np.full((N_CTX, D), 0.25)
    strategy.begin_round(glob)
    np.testing.assert_allclose(strategy.learner.get_global(), glob)
    np.testing.assert_allclose(strategy.prompt(), glob.reshape(-1))
    local = _strategy("local", tiny_backbone, ("a", "b"))
    with pytest.raises(
        LearningConfigError, match="'global_prompt' must be None for strategy 'local'"
    ):
        local.begin_round(glob)


def test_state_round_trip(tiny_backbone: Backbone, toy_features: FeatureSet) -> None:
    strategy = _strategy("secfpp", tiny_backbone, toy_features.classnames)
    strategy.train_round(toy_features.features, toy_features.labels, epochs=1)
    saved = strategy.state()
    restored = _strategy("secfpp", tiny_backbone, toy_features.classnames, seed=99)
    restored.load_state(saved)
    np.testing.assert_allclose(restored.prompt(), strategy.prompt())
    with pytest.raises(LearningConfigError, match="'state' must have keys"):
        restored.load_state({"local": saved["local"]})


def test_dpfpl_without_noise_at_full_rank_equals_secfpp(
    tiny_backbone: Backbone, toy_features: FeatureSet
) -> None:
    # At rank k = n_ctx eq. (4) is exact, so with no noise and no clipping a DP-FPL step is a
    # plain step on G and L: the two strategies must train identically.
    big = {"rank": N_CTX, "noise_multiplier": 0.0, "clip_norm": 1e6, "update_clip_norm": 1e6}
    dpfpl = _strategy("dpfpl", tiny_backbone, toy_features.classnames, **big)
    secfpp = _strategy("secfpp", tiny_backbone, toy_features.classnames)
    a = dpfpl.train_round(toy_features.features, toy_features.labels, epochs=2)
    b = secfpp.train_round(toy_features.features, toy_features.labels, epochs=2)
    np.testing.assert_allclose(a.prompt, b.prompt, atol=1e-5)
    assert a.global_update is not None
    assert b.global_update is not None
    np.testing.assert_allclose(a.global_update, b.global_update, atol=1e-5)


def test_dpfpl_noise_is_reproducible_from_the_injected_source(
    tiny_backbone: Backbone, toy_features: FeatureSet
) -> None:
    def run(seed: int) -> np.ndarray:
        strategy = get_strategy(
            "dpfpl",
            backbone=tiny_backbone,
            classnames=toy_features.classnames,
            rng=DeterministicRandom(seed),
            rank=2,
            noise_multiplier=1.0,
            **SMALL,
        )
        return strategy.train_round(toy_features.features, toy_features.labels, epochs=1).prompt

    np.testing.assert_array_equal(run(1), run(1))
    assert not np.allclose(run(1), run(2))


def test_dpfpl_update_is_clipped_for_gdp(tiny_backbone: Backbone, toy_features: FeatureSet) -> None:
    strategy = _strategy(
        "dpfpl",
        tiny_backbone,
        toy_features.classnames,
        update_clip_norm=1e-4,
        global_noise_multiplier=0.8,
        lr=0.5,
    )
    assert isinstance(strategy, DpFplStrategy)
    out = strategy.train_round(toy_features.features, toy_features.labels, epochs=1)
    assert out.global_update is not None
    assert np.linalg.norm(out.global_update) <= 1e-4 * (1 + 1e-9)
    assert strategy.gdp_parameters() == GdpParameters(clip_norm=1e-4, noise_multiplier=0.8)
    assert strategy.ldp_parameters().releases_per_step == 2


@pytest.mark.parametrize(
    ("name", "settings", "message"),
    [
        (
            "fedavg",
            {},
            "'name' must be one of dpfpl, feddpa, local, promptfl, protopfl-igpp, "
            "protopfl-vpdr, secfpp",
        ),
        ("secfpp", {"rank": 2}, "'rank' is not a setting of StrategyConfig"),
        ("secfpp", {"lr": 0.0}, r"'lr' must be a finite number in \(0\.0, inf\), not 0\.0"),
        ("secfpp", {"lr": math.inf}, r"'lr' must be a finite number in \(0\.0, inf\), not inf"),
        ("secfpp", {"momentum": math.nan}, r"'momentum' must be a finite number in \[0\.0, 1\.0\)"),
        ("secfpp", {"batch_size": 0}, "'batch_size' must be an integer >= 1"),
        ("dpfpl", {"rank": 5}, r"'rank' must be in \[1, 4\]"),
        ("dpfpl", {"noise_multiplier": -1.0}, "'noise_multiplier' must be a finite number in"),
    ],
)
def test_invalid_configuration(
    tiny_backbone: Backbone, name: str, settings: dict[str, Any], message: str
) -> None:
    with pytest.raises(LearningConfigError, match=message):
        get_strategy(name, backbone=tiny_backbone, classnames=("a", "b"), n_ctx=N_CTX, **settings)


def test_train_round_checks_its_inputs(tiny_backbone: Backbone) -> None:
    strategy = _strategy("secfpp", tiny_backbone, ("a", "b"))
    features = torch.zeros(4, 32)
    with pytest.raises(LearningConfigError, match="'epochs' must be an integer >= 1"):
        strategy.train_round(features, torch.zeros(4, dtype=torch.int64), epochs=0)
    with pytest.raises(LearningConfigError, match="'labels' must be in"):
        strategy.train_round(features, torch.full((4,), 2), epochs=1)
    with pytest.raises(LearningConfigError, match="'features' must be"):
        strategy.train_round(features, torch.zeros(3, dtype=torch.int64), epochs=1)
