"""FedDPA (seed 002): each mechanism is checked against an independent computation.

Fisher (closed form on a linear model, brute-force per-example autograd on the backbone), the
masks on hand-made Fisher values, the mix that keeps personalized entries, the constraint
gradients (autograd), the clip over epoch calls, the federation's RDP calibration, the noise
the participant actually adds (statistical), the ledger's cap, and a run through the simulation.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from pydantic import ValidationError
from torch.nn.functional import log_softmax

from demo.simulation import ParticipantData, SimulationConfig, simulate
from secfpp.coordinator.rounds.protocol import planned_releases
from secfpp.coordinator.rounds.state import RoundState
from secfpp.crypto.aggregation import prepare_update
from secfpp.crypto.clustering import Membership
from secfpp.crypto.dp import calibrate_noise_multiplier, check_budget, epsilon_for, epsilon_spent
from secfpp.crypto.dp.ledger import LedgerRecord
from secfpp.crypto.errors import ParameterError, PrivacyBudgetError
from secfpp.crypto.quantize import lift
from secfpp.crypto.rng import DeterministicRandom
from secfpp.federation import FederationConfig, FederationCreate
from secfpp.participant.federation import federation_config
from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.features import FeatureSet
from secfpp.participant.learning.prompt_learner import PromptLearner
from secfpp.participant.learning.strategies import FedDpaStrategy, get_strategy
from secfpp.participant.learning.strategies.feddpa_fisher import (
    constraint_gradient,
    constraint_terms,
    empirical_fisher,
    fisher_masks,
    fisher_per_example,
    layerwise_normalize,
    personalize,
)
from secfpp.participant.trainer import PromptTrainer, strategy_settings

N_CTX, CLASSES = 4, ("zero", "one", "two")


def _data(backbone: Backbone, n: int = 30, *, seed: int = 0) -> FeatureSet:
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 1, (3, backbone.embed_dim))
    labels = rng.integers(0, 3, n)
    feats = centres[labels] + rng.normal(0, 0.5, (n, backbone.embed_dim))
    feats /= np.linalg.norm(feats, axis=1, keepdims=True)
    return FeatureSet(
        torch.tensor(feats, dtype=torch.float32), torch.tensor(labels), CLASSES, f"s{seed}"
    )


def _feddpa(backbone: Backbone, **settings: Any) -> FedDpaStrategy:
    merged: dict[str, Any] = {"n_ctx": N_CTX, "batch_size": 8, "lr": 0.05, **settings}
    strategy = get_strategy("feddpa", backbone=backbone, classnames=CLASSES, **merged)
    assert isinstance(strategy, FedDpaStrategy)
    return strategy


def _brute_force_fisher(
    learner: PromptLearner, ctx: torch.Tensor, data: FeatureSet
) -> torch.Tensor:
    """``mean_n (d log p(y_n|x_n) / d ctx)^2``, one example and one backward pass at a time."""
    total = torch.zeros(ctx.shape, dtype=torch.float64)
    for x, y in zip(data.features, data.labels, strict=True):
        leaf = ctx.detach().clone().requires_grad_(True)
        log_p = log_softmax(learner.logits(x[None], ctx=leaf), dim=1)[0, int(y)]
        (grad,) = torch.autograd.grad(log_p, leaf)
        total += grad.double() ** 2
    return total / len(data.labels)


# -- Fisher information and masks ----------------------------------------------------------


def test_fisher_matches_the_closed_form_of_a_linear_softmax() -> None:
    # Text features = ctx itself (class c's feature is row c): d log p_y / d ctx[c, k] =
    # s (1[c = y] - p_c) x_k, so F[c, k] = mean_n s^2 (1[c = y_n] - p_n,c)^2 x_n,k^2.
    gen = torch.Generator().manual_seed(3)
    ctx = torch.randn(3, 5, generator=gen, dtype=torch.float64).float()
    x = torch.randn(40, 5, generator=gen)
    y = torch.randint(0, 3, (40,), generator=gen)
    s = 2.5
    fisher = fisher_per_example(lambda c: c, ctx, x, y, logit_scale=s, chunk=7)
    p = torch.softmax(s * x.double() @ ctx.double().T, dim=1)  # (N, 3)
    residual = torch.nn.functional.one_hot(y, 3).double() - p  # (N, 3)
    expected = (s**2 * residual[:, :, None] ** 2 * x.double()[:, None, :] ** 2).mean(dim=0)
    torch.testing.assert_close(fisher, expected, rtol=1e-5, atol=1e-9)


@pytest.mark.parametrize(("method", "chunk"), [("examples", 64), ("jacobian", 5), ("auto", 64)])
def test_fisher_matches_per_example_autograd_on_the_backbone(
    tiny_backbone: Backbone, method: str, chunk: int
) -> None:
    strategy = _feddpa(tiny_backbone)
    data = _data(tiny_backbone, 40)  # N = 40 > e = 32: "auto" takes the Jacobian route
    ctx = strategy.learner.global_ctx
    assert ctx is not None
    fisher = empirical_fisher(
        strategy.learner, ctx, data.features, data.labels, method=method, chunk=chunk
    )
    expected = _brute_force_fisher(strategy.learner, ctx, data)
    assert float(expected.max()) > 0
    torch.testing.assert_close(fisher, expected, rtol=2e-3, atol=1e-6 * float(expected.max()))
    assert "prompt_embeddings" not in vars(strategy.learner)  # the capture hook is removed


def test_masks_keep_exactly_the_entries_at_or_above_tau() -> None:
    fisher = torch.tensor(
        [
            [0.0, 1.0, 2.0, 3.0, 4.0],  # normalized 0, .25, .5, .75, 1
            [7.0, 7.0, 7.0, 7.0, 7.0],  # no spread: normalized 0
            [5.0, 0.0, 0.0, 0.0, 1.0],  # normalized 1, 0, 0, 0, .2
        ],
        dtype=torch.float64,
    )
    normalized = layerwise_normalize(fisher)
    torch.testing.assert_close(
        normalized,
        torch.tensor(
            [[0, 0.25, 0.5, 0.75, 1], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0.2]], dtype=torch.float64
        ),
    )
    m1, m2 = fisher_masks(normalized, 0.5)
    expected = torch.tensor([[0, 0, 1, 1, 1], [0, 0, 0, 0, 0], [1, 0, 0, 0, 0]], dtype=torch.bool)
    assert torch.equal(m1, expected)
    assert torch.equal(m2, ~expected)
    previous = torch.arange(15.0).reshape(3, 5)
    glob = -torch.ones(3, 5)
    mixed = personalize(previous, glob, m1)
    assert torch.equal(mixed, torch.where(expected, previous, glob))
    assert fisher_masks(normalized, 0.0)[0].all()  # tau = 0 personalizes everything
    with pytest.raises(LearningConfigError, match="tau"):
        fisher_masks(normalized, 1.5)


# -- the strategy's round ------------------------------------------------------------------


def test_round_start_keeps_high_fisher_entries_and_takes_the_rest_from_global(
    tiny_backbone: Backbone,
) -> None:
    data = _data(tiny_backbone, 24)
    strategy = _feddpa(tiny_backbone, tau=0.3)
    trainer = PromptTrainer(strategy, data, data, epochs=2, reduction=None)
    rng = np.random.default_rng(1)
    g1 = rng.normal(0, 0.02, (N_CTX, 32))
    trainer.train(1, g1)
    assert strategy.mask is not None
    assert not strategy.mask.any()  # round 1: all global
    w1 = strategy.personal().clone()
    trainer.evaluate(rng.normal(0, 0.02, (N_CTX, 32)))  # the published global is installed
    g2 = 3.0 + rng.normal(0, 0.02, (N_CTX, 32))  # far from anything trained locally
    ctx = strategy.learner.global_ctx
    assert ctx is not None
    expected_fisher = layerwise_normalize(_brute_force_fisher(strategy.learner, w1, data))
    out = trainer.train(2, g2)
    mask = strategy.mask
    assert mask is not None
    assert strategy.round_start is not None
    assert float((expected_fisher - 0.3).abs().min()) > 1e-3  # no entry at the threshold
    assert torch.equal(mask, expected_fisher >= 0.3)  # the mask is the Fisher's, exactly
    assert 0 < int(mask.sum()) < mask.numel()
    start = strategy.round_start
    assert torch.equal(start[mask], w1[mask])  # personalized: the participant's own values
    assert torch.equal(start[~mask], torch.from_numpy(g2).float()[~mask])  # shared: global
    # The update is relative to that start: start + update = the trained prompt.
    assert out.update is not None
    after = strategy.personal()
    np.testing.assert_allclose(
        out.update, (after.double() - start.double()).numpy().reshape(-1), atol=1e-6
    )
    assert float((after[mask] - 3.0).abs().min()) > 1.0  # never replaced by the global


def test_update_is_clipped_to_c_over_the_epoch_calls(tiny_backbone: Backbone) -> None:
    data = _data(tiny_backbone, 24)
    clip = 1e-3
    strategy = _feddpa(tiny_backbone, lr=0.5, clip_norm=clip)
    trainer = PromptTrainer(strategy, data, data, epochs=3, reduction=None)
    glob = np.random.default_rng(2).normal(0, 0.02, (N_CTX, 32))
    out = trainer.train(1, glob)
    assert out.update is not None
    assert strategy.round_start is not None
    raw = (strategy.personal().double() - strategy.round_start.double()).numpy().reshape(-1)
    assert np.linalg.norm(raw) > 10 * clip  # clipping is active
    assert np.linalg.norm(out.update) <= clip * (1 + 1e-12)
    np.testing.assert_allclose(out.update, raw * (clip / np.linalg.norm(raw)), rtol=1e-9)


def test_constraint_gradient_is_the_autograd_gradient_of_r1_plus_r2() -> None:
    gen = torch.Generator().manual_seed(5)
    m1 = torch.rand(4, 6, generator=gen) > 0.6
    for scale, clip in ((1.0, 0.5), (0.1, 5.0)):  # shared norm above, then below C
        delta = scale * torch.randn(4, 6, generator=gen, dtype=torch.float64)
        leaf = delta.clone().requires_grad_(True)
        r1 = 0.07 / 2 * torch.linalg.vector_norm(leaf * m1)
        r2 = 0.3 / 2 * (torch.linalg.vector_norm(leaf * ~m1) - clip).abs()
        (r1 + r2).backward()
        grad = constraint_gradient(delta, m1, lambda_1=0.07, lambda_2=0.3, clip_norm=clip)
        assert leaf.grad is not None
        torch.testing.assert_close(grad, leaf.grad)
        values = constraint_terms(delta, m1, lambda_1=0.07, lambda_2=0.3, clip_norm=clip)
        assert values == pytest.approx((float(r1.detach()), float(r2.detach())))
    zero = constraint_gradient(torch.zeros(4, 6), m1, lambda_1=1.0, lambda_2=1.0, clip_norm=1.0)
    assert torch.equal(zero, torch.zeros(4, 6))  # subgradient 0 at the round's start


def test_state_round_trip_restores_the_personalized_prompt(tiny_backbone: Backbone) -> None:
    data = _data(tiny_backbone, 16)
    first = _feddpa(tiny_backbone)
    first.begin_round(np.zeros((N_CTX, 32)))
    first.train_round(data.features, data.labels, epochs=1)
    second = _feddpa(tiny_backbone, seed=9)
    second.load_state(first.state())
    assert torch.equal(second.personal(), first.personal())
    assert second.evaluate(data.features, data.labels) == first.evaluate(data.features, data.labels)


# -- federation: settings, calibration, noise, ledger ----------------------------------------


def _create(**dp: object) -> FederationCreate:
    return FederationCreate.model_validate(
        {
            "name": "feddpa",
            "strategy": "feddpa",
            "n_participants": 4,
            "backbone": None,  # unpinned: a stand-in trainer of this width
            "prompt": {"n_ctx": N_CTX, "dim": 32},
            "rounds": {"total": 10},
            "tolerance": {"l2_clip": 0.5, "min_aggregation_size": 2, "reduced_dim": 16},
            "dp": {"mechanism": "distributed", **dp},
        }
    )


def test_target_epsilon_is_calibrated_with_rdp_and_caps_the_budget() -> None:
    config = _create(target_epsilon=4.0, delta=1e-5).resolve()
    z = config.dp.noise_multiplier
    assert z is not None
    assert z == calibrate_noise_multiplier(epsilon=4.0, delta=1e-5, rounds=10, method="rdp")
    assert epsilon_for(z, rounds=10, delta=1e-5, method="rdp") <= 4.0
    assert epsilon_for(z - 2e-3, rounds=10, delta=1e-5, method="rdp") > 4.0  # tight
    assert config.dp.epsilon_budget == 4.0
    assert strategy_settings(config, {"tau": 0.4}) == {
        "tau": 0.4,
        "clip_norm": 0.5,
    }
    with pytest.raises(LearningConfigError, match="clip_norm"):
        strategy_settings(config, {"clip_norm": 1.0})


def test_federation_settings_are_refused_when_inconsistent() -> None:
    with pytest.raises(ParameterError, match="noise_multiplier"):
        _create(target_epsilon=4.0, noise_multiplier=1.0).resolve()
    with pytest.raises(ValidationError, match=r"rounds\.total"):
        FederationCreate.model_validate(
            {
                "name": "x",
                "strategy": "feddpa",
                "n_participants": 4,
                "dp": {"mechanism": "distributed", "target_epsilon": 1.0},
            }
        )
    with pytest.raises(ValidationError, match="before sharing"):
        _create(mechanism="gaussian", noise_multiplier=1.0)
    with pytest.raises(ValidationError, match="target_epsilon needs mechanism"):
        FederationCreate.model_validate(
            {
                "name": "x",
                "strategy": "feddpa",
                "n_participants": 4,
                "rounds": {"total": 3},
                "dp": {"mechanism": "none", "target_epsilon": 1.0},
            }
        )


def test_noise_the_participants_add_has_the_accountants_std() -> None:
    config = _create(target_epsilon=2.0).resolve()
    # as the daemon reads it: the stored document parsed into the typed config
    daemon = federation_config(config.model_dump(mode="json"))
    params = daemon.crypto_params()
    noise = daemon.distributed_noise(params)
    assert noise is not None
    assert noise.noise_multiplier == config.dp.noise_multiplier
    spec = params.aggregation_field
    length = 20_000
    vectors = [
        prepare_update(
            np.zeros(length),
            spec,
            l2_clip=params.l2_clip,
            rng=DeterministicRandom(f"p{i}"),
            noise=noise,
        )
        # the honest shares of the smallest sum a participant accepts: its T colluders
        # subtract their own, what remains must carry the accountant's std
        for i in range(params.min_aggregation_size - params.colluders)
    ]
    total = lift(spec.field.sum(np.vstack(vectors), axis=0), spec.field) / float(2**spec.bits)
    expected = config.dp.noise_multiplier * params.l2_clip  # sigma C, real units
    assert expected is not None
    # std of a sample std over 20000 normal draws is ~0.5%: 3% is > 5 standard errors.
    assert abs(float(total.std()) / expected - 1.0) < 0.03
    assert abs(float(total.mean())) < 5 * expected / math.sqrt(length)


def _round_state(config: FederationConfig) -> RoundState:
    members = list(range(1, config.n_participants + 1))
    return RoundState(
        membership=Membership.initial(members).to_dict(),
        generation=0,
        clustering=False,
        participants=members,
    )


def test_ledger_records_every_planned_round_and_refuses_past_the_cap() -> None:
    config = _create(target_epsilon=3.0).resolve()
    budget = config.dp.epsilon_budget
    assert budget == 3.0
    assert config.rounds.total == 10
    ledger: list[LedgerRecord] = []
    for number in range(1, 11):
        releases = planned_releases(config, "fed", number, _round_state(config))
        assert [r.mechanism for r in releases] == ["distributed_discrete_gaussian"]
        check_budget(ledger, releases, epsilon_budget=budget, delta=config.dp.delta)
        ledger.extend(releases)
    spent = epsilon_spent(ledger, delta=config.dp.delta)
    assert 0.9 * budget < spent <= budget
    with pytest.raises(PrivacyBudgetError, match="epsilon_budget=3"):
        check_budget(
            ledger,
            planned_releases(config, "fed", 11, _round_state(config)),
            epsilon_budget=budget,
            delta=config.dp.delta,
        )


# -- end to end --------------------------------------------------------------------------------


def test_feddpa_runs_through_the_simulation_with_distributed_dp(
    tiny_backbone: Backbone, tmp_path: Path
) -> None:
    participants = []
    for i in range(4):
        data = _data(tiny_backbone, 40, seed=i % 2)
        train = FeatureSet(data.features[:30], data.labels[:30], CLASSES, f"t{i}")
        test = FeatureSet(data.features[30:], data.labels[30:], CLASSES, f"e{i}")
        participants.append(ParticipantData(f"p{i}", train, test, CLASSES, f"g{i % 2}"))
    config = SimulationConfig(
        strategy="feddpa",
        rounds=2,
        epochs=1,
        n_ctx=2,
        reduced_dim=16,
        min_aggregation_size=2,
        l2_clip=0.5,
        dp={"mechanism": "distributed", "target_epsilon": 8.0},
    )
    result = simulate(
        participants, tiny_backbone, config, workdir=tmp_path, seed=1, deterministic=True
    )
    assert [r.stage for r in result.rounds] == ["published", "published"]
    for record in result.rounds:
        assert set(record.accuracy) == {f"p{i}" for i in range(4)}
        assert all(0.0 <= a <= 1.0 for a in record.accuracy.values())
