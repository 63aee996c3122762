"""Held-out accuracy from cached features."""

from __future__ import annotations

import pytest
import torch

from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.evaluation import accuracy
from secfpp.participant.learning.prompt_learner import PromptLearner


def test_accuracy_of_the_text_features_themselves_is_one(tiny_backbone: Backbone) -> None:
    learner = PromptLearner(tiny_backbone, ("a", "b", "c"), n_ctx=4)
    with torch.no_grad():
        text = learner.text_features()
    labels = torch.tensor([0, 1, 2])
    assert accuracy(learner, text, labels) == 1.0
    assert accuracy(learner, text, torch.tensor([1, 2, 0]), batch_size=1) == 0.0


def test_accuracy_is_a_fraction(tiny_backbone: Backbone) -> None:
    learner = PromptLearner(tiny_backbone, ("a", "b"), n_ctx=4)
    features = tiny_backbone.encode_images(torch.randn(7, 3, 32, 32))
    value = accuracy(learner, features, torch.tensor([0, 1, 0, 1, 0, 1, 0]))
    assert isinstance(value, float)
    assert 0.0 <= value <= 1.0
    assert value * 7 == pytest.approx(round(value * 7))


def test_accuracy_checks_shapes(tiny_backbone: Backbone) -> None:
    learner = PromptLearner(tiny_backbone, ("a", "b"), n_ctx=4)
    with pytest.raises(LearningConfigError, match="'features' must be"):
        accuracy(learner, torch.zeros(3, 32), torch.zeros(2, dtype=torch.int64))
    with pytest.raises(LearningConfigError, match="at least one sample"):
        accuracy(learner, torch.zeros(0, 32), torch.zeros(0, dtype=torch.int64))
