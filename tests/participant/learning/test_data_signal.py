"""The data signals SecPC clusters: ``data-balanced`` (the default: the mean of a participant's
per-class mean image embeddings) and ``data`` (its plain mean image embedding)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from secfpp.federation import ClusteringPolicy, FederationCreate
from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.features import FeatureSet
from secfpp.participant.learning.reduction import JLReduction, data_signal, signal_of_data
from secfpp.participant.learning.strategies import get_strategy
from secfpp.participant.trainer import PromptTrainer

E, R = 24, 16


def _domain_with_labels(
    rng: np.random.Generator, centre: np.ndarray, weights: np.ndarray, n: int, spread: float = 0.6
) -> tuple[np.ndarray, np.ndarray]:
    """``n`` unit image embeddings of one domain and their labels: ``centre`` plus one of
    ``len(weights)`` class offsets (of scale ``spread``) drawn by ``weights`` (the
    participant's label mix), plus noise."""
    offsets = np.random.default_rng(99).normal(0, spread, (len(weights), E))  # the classes
    labels = rng.choice(len(weights), size=n, p=weights)
    x = centre + offsets[labels] + rng.normal(0, 0.2, (n, E))
    unit: np.ndarray = x / np.linalg.norm(x, axis=1, keepdims=True)
    return unit, labels


def _domain(
    rng: np.random.Generator, centre: np.ndarray, weights: np.ndarray, n: int
) -> np.ndarray:
    return _domain_with_labels(rng, centre, weights, n)[0]


def test_known_answer_and_unit_norm() -> None:
    """``unit(mean(F) @ R)`` with ``R`` the public JL matrix of ``seed + 1`` (not the prompt
    reduction's ``seed``), worked out here step by step."""
    features = np.arange(3 * E, dtype=np.float64).reshape(3, E) / 100.0
    mean = features.sum(axis=0) / 3
    projected = mean @ np.random.default_rng(8).standard_normal((E, R)) / np.sqrt(R)
    expected = projected / np.sqrt((projected**2).sum())
    got = data_signal(torch.tensor(features, dtype=torch.float32), R, 7)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    assert got.shape == (R,)
    assert abs(np.linalg.norm(got) - 1) < 1e-12
    assert not np.allclose(got, data_signal(features, R, 6))  # the seed is public and fixed


# fewer examples than the profile: each computes the data signal twice; order invariance needs few
@settings(max_examples=25)
@given(st.integers(0, 2**31 - 1))
def test_the_order_of_the_images_does_not_matter(seed: int) -> None:
    rng = np.random.default_rng(seed)
    features = rng.normal(size=(int(rng.integers(1, 40)), E))
    shuffled = features[rng.permutation(features.shape[0])]
    np.testing.assert_allclose(data_signal(features, R, 3), data_signal(shuffled, R, 3), atol=1e-12)


def test_label_mix_moves_it_less_than_the_domain() -> None:
    """Two participants of one domain with opposite label skews are nearer each other than
    either is to a participant of another domain with the same skew as itself: the property
    the default signal exists for (a trained prompt does not have it under strong skew)."""
    rng = np.random.default_rng(4)
    a, b = rng.normal(0, 1, E), rng.normal(0, 1, E)
    skew1, skew2 = np.array([0.8, 0.1, 0.1]), np.array([0.1, 0.1, 0.8])
    x1 = data_signal(_domain(rng, a, skew1, 200), R, 0)
    x2 = data_signal(_domain(rng, a, skew2, 200), R, 0)
    y1 = data_signal(_domain(rng, b, skew1, 200), R, 0)
    assert np.linalg.norm(x1 - x2) < 0.5 * min(np.linalg.norm(x1 - y1), np.linalg.norm(x2 - y1))


def test_balanced_known_answer() -> None:
    """``data-balanced``: ``unit(mean_y(mean{f_k : y_k = y}) @ R)``, worked out by hand for
    classes 2 (three images) and 5 (one image): the plain mean weighs them 3 : 1, this 1 : 1."""
    features = np.arange(4 * E, dtype=np.float64).reshape(4, E) / 100.0
    labels = np.array([2, 5, 2, 2])
    centre = (features[[0, 2, 3]].sum(axis=0) / 3 + features[1]) / 2
    projected = centre @ np.random.default_rng(8).standard_normal((E, R)) / np.sqrt(R)
    expected = projected / np.sqrt((projected**2).sum())
    got = data_signal(torch.tensor(features), R, 7, labels=torch.tensor(labels))
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert not np.allclose(got, data_signal(features, R, 7))


# each example builds two small data sets and two signals
@settings(max_examples=25)
@given(st.integers(0, 2**31 - 1))
def test_balanced_ignores_how_many_images_of_each_class(seed: int) -> None:
    """Repeating one class's images (a different label mix, the same classes and images)
    leaves ``data-balanced`` where it was; the plain mean moves (unless nothing to move)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 30))
    features = rng.normal(size=(n, E))
    labels = rng.integers(0, 4, n)
    labels[:2] = [0, 1]  # at least two classes
    extra = np.flatnonzero(labels == 0)
    skewed, skewed_labels = (
        np.concatenate([features, np.repeat(features[extra], 3, axis=0)]),
        np.concatenate([labels, np.repeat(labels[extra], 3)]),
    )
    np.testing.assert_allclose(
        data_signal(features, R, 1, labels=labels),
        data_signal(skewed, R, 1, labels=skewed_labels),
        atol=1e-12,
    )
    assert not np.allclose(data_signal(features, R, 1), data_signal(skewed, R, 1), atol=1e-9)


def test_strong_label_skew_moves_the_plain_mean_but_not_the_balanced_one() -> None:
    """Dirichlet-like skew where class offsets are as large as the domain gap (the held-out
    case of docs/protocol.md, "What SecPC clusters"): two participants of one domain holding
    the same classes in opposite proportions. The plain means are farther apart than from a
    participant of another domain; the balanced ones are the nearest pair."""
    rng = np.random.default_rng(11)
    a = rng.normal(0, 1, E)
    b = a + rng.normal(0, 0.5, E)  # a nearby domain
    skew1 = np.array([0.9, 0.05, 0.05])
    skew2 = np.array([0.05, 0.05, 0.9])
    p1, l1 = _domain_with_labels(rng, a, skew1, 400, spread=1.5)
    p2, l2 = _domain_with_labels(rng, a, skew2, 400, spread=1.5)
    q1, m1 = _domain_with_labels(rng, b, skew1, 400, spread=1.5)

    def gaps(balanced: bool) -> tuple[float, float]:
        def sig(f: np.ndarray, lab: np.ndarray) -> np.ndarray:
            return data_signal(f, R, 0, labels=lab if balanced else None)

        x1, x2, y1 = sig(p1, l1), sig(p2, l2), sig(q1, m1)
        return float(np.linalg.norm(x1 - x2)), float(np.linalg.norm(x1 - y1))

    same_domain, other_domain = gaps(balanced=False)
    assert same_domain > other_domain  # the label mix outweighs the domain
    same_domain, other_domain = gaps(balanced=True)
    assert same_domain < 0.5 * other_domain


def test_bad_labels_are_refused() -> None:
    features = np.ones((3, E))
    with pytest.raises(LearningConfigError, match="labels"):
        data_signal(features, R, 0, labels=np.array([0, 1]))
    with pytest.raises(LearningConfigError, match="labels"):
        data_signal(features, R, 0, labels=np.array([0.0, 1.0, 1.0]))


def test_bad_features_are_refused() -> None:
    with pytest.raises(LearningConfigError, match="non-empty"):
        data_signal(np.zeros((0, E)), R, 0)
    with pytest.raises(LearningConfigError, match="non-empty"):
        data_signal(np.zeros(E), R, 0)
    with pytest.raises(LearningConfigError, match="zero mean"):
        data_signal(np.zeros((4, E)), R, 0)


def _features(backbone: Backbone, seed: int) -> FeatureSet:
    rng = np.random.default_rng(seed)
    feats = rng.normal(0, 1, (20, backbone.embed_dim))
    feats /= np.linalg.norm(feats, axis=1, keepdims=True)
    labels = torch.tensor(rng.integers(0, 2, 20))
    return FeatureSet(torch.tensor(feats, dtype=torch.float32), labels, ("a", "b"), f"d{seed}")


@pytest.mark.parametrize("signal", ["data-balanced", "data", "prompt"])
def test_the_trainer_sends_the_signal_the_federation_names(
    tiny_backbone: Backbone, signal: str
) -> None:
    train = _features(tiny_backbone, 1)
    strategy = get_strategy("secfpp", backbone=tiny_backbone, classnames=["a", "b"], n_ctx=2)
    reduction = JLReduction(n_ctx=2, ctx_dim=tiny_backbone.text.width, r=R, seed=5)
    trainer = PromptTrainer(
        strategy, train, train, epochs=1, reduction=reduction, reduce_direction=True, signal=signal
    )
    g = np.random.default_rng(0).normal(0, 0.02, (2, tiny_backbone.text.width))
    first, second = trainer.train(1, g).reduced, trainer.train(2, g + 0.1).reduced
    assert first is not None
    assert second is not None
    labels = train.labels if signal == "data-balanced" else None
    expected = data_signal(train.features, R, 5, labels=labels)
    if signal != "prompt":  # the data's, every round, whatever the prompt did
        np.testing.assert_array_equal(first, expected)
        np.testing.assert_array_equal(second, expected)
    else:
        assert not np.allclose(first, expected)
        assert not np.allclose(first, second)


def test_the_trainer_refuses_an_unknown_signal(tiny_backbone: Backbone) -> None:
    train = _features(tiny_backbone, 2)
    strategy = get_strategy("secfpp", backbone=tiny_backbone, classnames=["a", "b"], n_ctx=2)
    with pytest.raises(LearningConfigError, match="signal"):
        PromptTrainer(strategy, train, train, epochs=1, reduction=None, signal="labels")


def test_the_split_rule_has_one_setting_for_every_signal_and_drops_the_old_thresholds() -> None:
    policy = ClusteringPolicy()
    assert (policy.false_split_rate, policy.null_draws) == (0.05, 199)
    stored = ClusteringPolicy.model_validate(
        {"split_threshold": 0.2, "probe_fraction": 0.5, "probe_ratio": 0.1}
    )
    assert stored == policy  # a federation stored with the retired thresholds loads


def test_the_federation_names_its_signal_and_refuses_others() -> None:
    body = {"name": "f", "n_participants": 4, "tolerance": {"reduced_dim": 8}}
    assert FederationCreate.model_validate(body).reduction.signal == "data-balanced"
    for signal in ("data", "prompt"):
        chosen = {**body, "reduction": {"signal": signal}}
        assert FederationCreate.model_validate(chosen).reduction.signal == signal
    with pytest.raises(ValidationError, match="signal"):
        FederationCreate.model_validate({**body, "reduction": {"signal": "labels"}})
    with pytest.raises(ValidationError, match="false_split_rate"):
        FederationCreate.model_validate({**body, "clustering": {"false_split_rate": 0}})


def test_a_federation_stored_with_the_former_default_keeps_it() -> None:
    """Stored configs hold every field (``model_dump``): one created when ``data`` was the
    default loads as ``data``, so its running daemons keep sending the same signal, and a
    daemon that does not know ``data-balanced`` refuses a new federation's config instead
    of clustering with the wrong signal (strict parsing, participant/federation.py)."""
    body = {"name": "f", "n_participants": 4, "tolerance": {"reduced_dim": 8}}
    stored = FederationCreate.model_validate(body).resolve().model_dump(mode="json")
    stored["reduction"]["signal"] = "data"
    loaded = type(FederationCreate.model_validate(body).resolve()).model_validate(stored)
    assert loaded.reduction.signal == "data"


def test_the_signal_name_picks_the_labels_and_prompt_is_not_a_data_signal() -> None:
    rng = np.random.default_rng(3)
    features, labels = rng.normal(size=(12, E)), rng.integers(0, 3, 12)
    np.testing.assert_array_equal(
        signal_of_data("data-balanced", features, labels, R, 2),
        data_signal(features, R, 2, labels=labels),
    )
    np.testing.assert_array_equal(
        signal_of_data("data", features, labels, R, 2), data_signal(features, R, 2)
    )
    with pytest.raises(LearningConfigError, match="signal"):
        signal_of_data("prompt", features, labels, R, 2)
