"""protopfl-igpp / protopfl-vpdr: prototypes, the combination rule, DCR, the release, the
aggregation on shares, the accounting, the federation settings, and one simulated federation
each through the real coordinator and secure aggregation."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from demo import simulation
from demo.simulation import ParticipantData, SimulationConfig, simulate
from secfpp.crypto.aggregation import decode_cluster_mean, member_sums, prepare_update
from secfpp.crypto.dp.groupwise import class_sums
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.rng import DeterministicRandom
from secfpp.federation import FederationCreate
from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.features import FeatureSet
from secfpp.participant.learning.prototypes import (
    combined_logits,
    decode_block,
    distillation_loss,
    encode_block,
    soft_clip,
)
from secfpp.participant.learning.strategies import (
    IgppStrategy,
    ProtoPflStrategy,
    VpdrStrategy,
    get_strategy,
)
from secfpp.participant.trainer import strategy_settings

CLASSES = ("zero", "one", "two")
D = 32  # tiny-test embed_dim


def _strategy(name: str, backbone: Backbone, **extra: Any) -> ProtoPflStrategy:
    settings = {"n_ctx": 2, "batch_size": 8, "lr": 0.01, "rounds": 3, **extra}
    strategy = get_strategy(
        name, backbone=backbone, classnames=CLASSES, rng=DeterministicRandom(name), **settings
    )
    assert isinstance(strategy, ProtoPflStrategy)
    return strategy


def _toy(n: int = 48, seed: int = 0, shift: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1, (3, D)) + shift
    labels = rng.integers(0, 3, n)
    feats = centres[labels] + rng.normal(0, 0.3, (n, D))
    feats /= np.linalg.norm(feats, axis=1, keepdims=True)
    return torch.tensor(feats, dtype=torch.float32), torch.tensor(labels)


# -- prototypes and the combination rule ---------------------------------------------------


@pytest.mark.parametrize("name", ["protopfl-igpp", "protopfl-vpdr"])
def test_released_prototype_is_the_class_mean(name: str, tiny_backbone: Backbone) -> None:
    """Known answer: features e0, e1 (class 0) and e2 (class 1); class 2 absent. With a
    clip that never binds, a negligible lr and a huge epsilon, row c is [w_c p_c, w_c]."""
    eye = torch.eye(D)
    features = torch.stack([eye[0], eye[1], eye[2]])
    labels = torch.tensor([0, 0, 1])
    strategy = _strategy(
        name, tiny_backbone, lr=1e-12, epsilon=1e7, clip=10.0, count_cap=4, rounds=1
    )
    # epsilon = 1e7 still leaves noise of std ~ 2e-3 here (z ~ 2e-4, 2R/n_c = 20): atol ~ 5 std,
    # far below the 0.25 steps a wrong weight or a sum instead of a mean would cause.
    strategy.train_round(features, labels, epochs=1)
    block = strategy.finish_round(None).reshape(3, D + 1)
    expected = np.zeros((3, D + 1))
    expected[0, 0] = expected[0, 1] = 0.5 * (2 / 4)
    expected[0, D] = 2 / 4
    expected[1, 2] = 1 / 4
    expected[1, D] = 1 / 4
    np.testing.assert_allclose(block, expected, atol=1e-2)
    prototypes, present = decode_block(block, 3, D)
    assert present.tolist() == [True, True, False]
    np.testing.assert_allclose(prototypes[0, :3], [0.5, 0.5, 0.0], atol=2e-2)


def test_combination_rule(tiny_backbone: Backbone) -> None:
    strategy = _strategy("protopfl-igpp", tiny_backbone)
    features, _ = _toy(8)
    text = strategy.learner.text_features().detach()
    scale = tiny_backbone.logit_scale.float().exp().detach()
    absent = torch.zeros(3, dtype=torch.bool)
    # w = 0, R = 1, identity adapter: CLIP's cosine logits exactly.
    clip_logits = strategy.learner.logits(features).detach()
    ours = combined_logits(
        features, text, torch.zeros(3, D), absent, scale=scale, weight=0.0, bound=1.0
    )
    torch.testing.assert_close(ours, clip_logits)
    # Absent prototypes fall back to the text features, whatever w.
    assert torch.allclose(
        combined_logits(
            features, text, torch.ones(3, D), absent, scale=scale, weight=0.7, bound=1.0
        ),
        clip_logits,
        atol=1e-5,
    )
    # w = 1 with prototypes: scale * (h / R) . P_c / ||P_c||, norm of P irrelevant.
    protos = torch.randn(3, D, generator=torch.Generator().manual_seed(0))
    present = torch.ones(3, dtype=torch.bool)
    got = combined_logits(features, text, 5 * protos, present, scale=scale, weight=1.0, bound=2.0)
    unit = protos / protos.norm(dim=1, keepdim=True)
    torch.testing.assert_close(got, scale * (features / 2.0) @ unit.T)


def test_soft_clip_bounds_and_limits() -> None:
    h = torch.tensor([[1e-3, 0.0], [0.5, 0.0], [3.0, 4.0], [3e3, 4e3]])
    out = soft_clip(h, 2.0, 0.05)
    norms = out.norm(dim=1)
    assert torch.all(norms < 2.0)
    torch.testing.assert_close(norms, 2.0 * h.norm(dim=1) / (h.norm(dim=1) + 0.1))
    assert float(norms[-1]) == pytest.approx(2.0, rel=1e-4)  # -> R for large norms
    assert float(norms[1]) > 0.5  # small features expand toward R
    torch.testing.assert_close(out / norms[:, None], h / h.norm(dim=1, keepdim=True))


def _norm_gap(strategy: ProtoPflStrategy, features: torch.Tensor) -> float:
    with torch.no_grad():
        h = strategy.adapter(features)
    return float((h.norm(dim=1) - strategy.config.clip).abs().mean())


def _noisy_toy_with_prototypes(strategy: ProtoPflStrategy) -> tuple[torch.Tensor, torch.Tensor]:
    """Overlapping classes (predictions not saturated) and their class means installed as
    the global prototypes."""
    rng = np.random.default_rng(0)
    centres, labels = rng.normal(0, 1, (3, D)), rng.integers(0, 3, 64)
    feats = centres[labels] + rng.normal(0, 1.5, (64, D))
    feats /= np.linalg.norm(feats, axis=1, keepdims=True)
    sums, counts = class_sums(feats, labels, 3)
    strategy.begin_round(encode_block(sums / counts[:, None], counts, cap=64))
    return torch.tensor(feats, dtype=torch.float32), torch.tensor(labels)


def test_dcr_term_is_stationary_at_the_clip_threshold(tiny_backbone: Backbone) -> None:
    """d/d lambda of the KD term at h = lambda a z: positive above R (1 - gamma) (pulls the
    norm down), negative below (pushes it up), ~0 at R (1 - gamma) where h^ = h."""
    strategy = _strategy("protopfl-vpdr", tiny_backbone, clip=1.0, soft_clip_gamma=0.05)
    assert isinstance(strategy, VpdrStrategy)
    features, _ = _noisy_toy_with_prototypes(strategy)
    teacher_text = strategy.learner.text_features(strategy.teacher).detach()
    slopes = {}
    for a in (0.3, 0.95, 3.0):
        lam = torch.tensor(1.0, requires_grad=True)
        h = lam * a * features
        kd = distillation_loss(
            strategy._logits(h, text=teacher_text), strategy._logits(soft_clip(h, 1.0, 0.05)), 4.0
        )
        (slopes[a],) = torch.autograd.grad(kd, lam)
    assert float(slopes[0.3]) < -1e-3
    assert float(slopes[3.0]) > 1e-2
    assert abs(float(slopes[0.95])) < 1e-6


def test_dcr_distillation_pulls_feature_norms_toward_the_clip(tiny_backbone: Backbone) -> None:
    """Start with inflated features (||h|| = 3, R = 1): training with the EMA-teacher KD
    term brings ||h|| closer to R than the same training without it (kd_weight 0)."""
    gaps = {}
    for kd in (0.0, 5.0):
        strategy = _strategy("protopfl-vpdr", tiny_backbone, kd_weight=kd, lr=0.05)
        features, labels = _noisy_toy_with_prototypes(strategy)
        with torch.no_grad():
            strategy.adapter.weight.copy_(2.0 * torch.eye(D))
        assert _norm_gap(strategy, features) == pytest.approx(2.0, abs=1e-4)
        strategy.train_round(features, labels, epochs=5)
        gaps[kd] = _norm_gap(strategy, features)
    assert gaps[5.0] < 0.8 * gaps[0.0], gaps


def test_vpdr_teacher_is_an_ema_of_the_prompt(tiny_backbone: Backbone) -> None:
    features, labels = _toy(8)
    strategy = _strategy("protopfl-vpdr", tiny_backbone, batch_size=8, ema_momentum=0.5)
    assert isinstance(strategy, VpdrStrategy)
    before_teacher = strategy.teacher.clone()
    strategy.train_round(features, labels, epochs=1)  # one step
    after = strategy.learner.context().detach()
    torch.testing.assert_close(strategy.teacher, 0.5 * before_teacher + 0.5 * after)


# -- release, accounting, state ------------------------------------------------------------


@pytest.mark.parametrize("name", ["protopfl-igpp", "protopfl-vpdr"])
def test_budget_is_spent_over_the_planned_rounds(name: str, tiny_backbone: Backbone) -> None:
    features, labels = _toy(30)
    strategy = _strategy(name, tiny_backbone, epsilon=2.0, rounds=2)
    for _ in range(2):
        strategy.train_round(features, labels, epochs=1)
        assert strategy.finish_round(None).shape == (3 * (D + 1),)
    spent = strategy.epsilon_spent()
    assert spent <= 2.0 + 1e-6
    assert spent == pytest.approx(2.0, rel=0.02)  # calibrated, not just safe
    records = strategy.ledger_records("fed", 4)
    assert [r.round for r in records] == [1, 2]
    assert all(r.kind == "ldp" and r.participants == (4,) for r in records)
    strategy.train_round(features, labels, epochs=1)
    with pytest.raises(LearningConfigError, match="'rounds'"):
        strategy.finish_round(None)


def test_vpdr_selects_dimensions_and_splits_the_budget(tiny_backbone: Backbone) -> None:
    features, labels = _toy(30)
    strategy = _strategy("protopfl-vpdr", tiny_backbone, epsilon=1.0, rounds=4)
    assert isinstance(strategy, VpdrStrategy)
    strategy.train_round(features, labels, epochs=1)
    strategy.finish_round(None)
    assert strategy.selected is not None
    assert strategy.selected.size == math.ceil(0.2 * D)
    assert strategy.selection_epsilon() == pytest.approx(0.1 / 4)
    igpp = _strategy("protopfl-igpp", tiny_backbone, epsilon=1.0, rounds=4)
    assert isinstance(igpp, IgppStrategy)
    # Theorem 4.2: VPP's Gaussian part is calibrated to (1 - r) epsilon, so its effective
    # multiplier exceeds IGPP's at the full epsilon, yet group A's noise is smaller.
    assert strategy.gaussian_multiplier() > igpp.gaussian_multiplier()
    std_a, _ = strategy.noise.stds(1.0, 10)
    assert std_a < igpp.gaussian_multiplier() * 2 * 1.0 / 10


@pytest.mark.parametrize("name", ["protopfl-igpp", "protopfl-vpdr"])
def test_state_round_trip(name: str, tiny_backbone: Backbone) -> None:
    features, labels = _toy(24)
    a = _strategy(name, tiny_backbone)
    a.train_round(features, labels, epochs=1)
    block = a.finish_round(None)
    a.begin_round(block.reshape(3, D + 1))
    b = _strategy(name, tiny_backbone)
    b.load_state(a.state())
    assert b.releases == 1
    assert b.present.all()
    assert b.evaluate(features, labels) == a.evaluate(features, labels)
    with pytest.raises(LearningConfigError, match="'state'"):
        b.load_state({"local": a.state()["local"]})


# -- aggregation on shares -------------------------------------------------------------------


def test_prototypes_decoded_from_shares_are_the_count_weighted_mean() -> None:
    """Three participants' blocks go through quantization, LCC shares, member-set sums and
    the coordinator's decode; the decoded prototypes equal the plaintext count-weighted
    mean sum_i n_ic p_ic / sum_i n_ic (all n_ic <= cap)."""
    rng = np.random.default_rng(5)
    n, d, classes, cap = 4, 6, 3, 64
    params = CryptoParams.for_federation(n, reduced_dim=8, l2_clip=10.0, min_aggregation_size=2)
    spec, code = params.aggregation_field, params.aggregation_lcc()
    means = [rng.normal(0, 0.3, (classes, d)) for _ in range(3)]
    counts = [np.array([5, 0, 9]), np.array([2, 7, 1]), np.array([30, 3, 0])]
    blocks = [encode_block(m, c, cap=cap).reshape(-1) for m, c in zip(means, counts, strict=True)]
    shares = {
        i: code.share(
            prepare_update(b, spec, l2_clip=10.0, rng=DeterministicRandom(i)),
            DeterministicRandom(f"s{i}"),
        )
        for i, b in enumerate(blocks)
    }
    members = [(0, 1, 2)]
    results = {
        j: member_sums(spec.field, {i: shares[i][j] for i in range(3)}, members)[0]
        for j in range(n)
    }
    mean, _ = decode_cluster_mean(code, results, length=blocks[0].size, spec=spec, contributors=3)
    prototypes, present = decode_block(mean, classes, d)
    weights = np.stack(counts).astype(float)  # (3 participants, classes)
    expected = np.einsum("ic,icd->cd", weights, np.stack(means)) / weights.sum(0)[:, None]
    assert present.all()
    np.testing.assert_allclose(prototypes, expected, atol=1e-5)
    # Not the unweighted mean of the participants' prototypes (the test can tell).
    unweighted = np.stack(means).mean(0)
    assert np.abs(prototypes - unweighted).max() > 1e-2


# -- federation settings ------------------------------------------------------------------------


def _create(strategy: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": "p",
        "strategy": strategy,
        "n_participants": 4,
        "backbone": None,  # unpinned: a stand-in trainer of this width
        "prompt": {"n_ctx": 2, "dim": 32},
        "tolerance": {"reduced_dim": 8, "min_aggregation_size": 2},
        "rounds": {"total": 5},
        **extra,
    }


def test_federation_config_fixes_the_prototype_block() -> None:
    body = _create("protopfl-vpdr", prototypes={"n_classes": 3, "dim": 32, "epsilon": 2.0})
    config = FederationCreate.model_validate(body).resolve()
    assert config.aggregation_length == 3 * 33
    assert config.global_shape == (3, 33)
    assert config.update_share_length() == math.ceil(99 / config.crypto.aggregation_code.k)
    with pytest.raises(ValueError, match="prototypes must be set"):
        FederationCreate.model_validate(_create("protopfl-igpp"))
    with pytest.raises(ValueError, match="prototypes must be set"):
        FederationCreate.model_validate(_create("secfpp", prototypes={"n_classes": 3, "dim": 32}))
    with pytest.raises(ValueError, match=r"rounds\.total"):
        FederationCreate.model_validate(
            {**body, "rounds": {"total": None}},
        )
    settings = strategy_settings(config, {"lr": 0.1})
    assert (settings["epsilon"], settings["rounds"], settings["lr"]) == (2.0, 5, 0.1)
    assert "n_classes" not in settings
    igpp = config.model_copy(update={"strategy": "protopfl-igpp"})
    assert "kd_weight" not in strategy_settings(igpp)
    with pytest.raises(LearningConfigError, match="fixed by the federation"):
        strategy_settings(config, {"epsilon": 3.0})


# -- end to end -----------------------------------------------------------------------------------


def _participants(n: int = 4) -> list[ParticipantData]:
    out = []
    for i in range(n):
        f, y = _toy(40, seed=10 + i, shift=0.2 * (i % 2))
        train = FeatureSet(f[:32], y[:32], CLASSES, f"t{i}")
        test = FeatureSet(f[32:], y[32:], CLASSES, f"e{i}")
        out.append(ParticipantData(f"p{i}", train, test, CLASSES, f"g{i % 2}"))
    return out


@pytest.mark.parametrize("name", ["protopfl-igpp", "protopfl-vpdr"])
def test_simulated_federation_aggregates_the_released_prototypes(
    name: str, tiny_backbone: Backbone, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One round through the real app, engines and secure aggregation: every participant
    then holds the same global prototypes, equal to the count-weighted mean of the blocks
    the participants released (decoded on shares by the coordinator)."""
    made: list[ProtoPflStrategy] = []
    released: list[np.ndarray] = []
    build = simulation._trainer

    def spy(*args: Any, **kwargs: Any) -> Any:
        trainer = build(*args, **kwargs)
        strategy = trainer.strategy
        assert isinstance(strategy, ProtoPflStrategy)
        finish = strategy.finish_round

        def record(update: Any) -> Any:
            block = finish(update)
            released.append(block)
            return block

        strategy.finish_round = record  # type: ignore[method-assign]
        made.append(strategy)
        return trainer

    monkeypatch.setattr(simulation, "_trainer", spy)
    config = SimulationConfig(
        strategy=name,
        rounds=1,
        epochs=1,
        n_ctx=2,
        lr=0.01,
        min_aggregation_size=2,
        prototypes={"epsilon": 8.0, "mix_weight": 0.5},
    )
    result = simulate(
        _participants(), tiny_backbone, config, workdir=tmp_path, seed=1, deterministic=True
    )
    record = result.rounds[0]
    assert record.stage == "published", record.failure_reason
    assert set(record.accuracy) == {f"p{i}" for i in range(4)}
    assert len(released) == 4
    assert all(s.releases == 1 for s in made)
    assert all(s.config.epsilon == 8.0 and s.config.rounds == 1 for s in made)
    expected, expected_present = decode_block(np.mean(released, axis=0), 3, D)
    for strategy in made:
        assert strategy.present.tolist() == expected_present.tolist() == [True] * 3
        np.testing.assert_allclose(strategy.global_prototypes, expected, atol=1e-5)
