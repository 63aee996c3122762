"""The CoOp prompt learner: encode_text replayed with learnable context, only ctx trains."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.prompt_learner import PromptLearner

CLASSES = ("red", "green", "light_blue")


def test_placeholder_context_reproduces_encode_text(tiny_backbone: Backbone) -> None:
    learner = PromptLearner(tiny_backbone, CLASSES, n_ctx=4)
    placeholder = tiny_backbone.tokenizer(["X"])[0, 1]
    ctx = tiny_backbone.text.token_embedding.weight[placeholder].expand(4, -1)
    expected = tiny_backbone.model.encode_text(learner.tokenized, normalize=True)  # type: ignore[operator]
    torch.testing.assert_close(learner.text_features(ctx), expected)


def test_only_context_tensors_are_parameters(tiny_backbone: Backbone) -> None:
    learner = PromptLearner(tiny_backbone, CLASSES, n_ctx=4)
    assert [name for name, _ in learner.named_parameters()] == ["global_ctx", "local_ctx"]
    assert set(learner.state_dict()) == {"global_ctx", "local_ctx"}
    assert learner.global_ctx is not None
    assert learner.global_ctx.shape == (4, 32)
    local_only = PromptLearner(tiny_backbone, CLASSES, n_ctx=4, use_global=False)
    assert [name for name, _ in local_only.named_parameters()] == ["local_ctx"]


def test_text_features_follow_the_context(tiny_backbone: Backbone) -> None:
    learner = PromptLearner(tiny_backbone, CLASSES, n_ctx=4)
    before = learner.text_features().detach()
    assert before.shape == (3, 32)
    torch.testing.assert_close(before.norm(dim=-1), torch.ones(3))
    with torch.no_grad():
        assert learner.local_ctx is not None
        # A random change: a constant shift of every entry would vanish in the LayerNorms.
        learner.local_ctx.add_(torch.randn(4, 32, generator=torch.Generator().manual_seed(0)))
    after = learner.text_features().detach()
    assert (after - before).abs().max() > 1e-3


def test_context_is_global_plus_local(tiny_backbone: Backbone) -> None:
    learner = PromptLearner(tiny_backbone, CLASSES, n_ctx=4)
    np.testing.assert_allclose(
        learner.context().detach().double().numpy(), learner.get_global() + learner.get_local()
    )


def test_backward_reaches_only_the_context(tiny_backbone: Backbone) -> None:
    learner = PromptLearner(tiny_backbone, CLASSES, n_ctx=4)
    images = tiny_backbone.encode_images(torch.randn(5, 3, 32, 32))
    logits = learner(images)
    assert logits.shape == (5, 3)
    torch.nn.functional.cross_entropy(logits, torch.tensor([0, 1, 2, 0, 1])).backward()  # type: ignore[no-untyped-call]
    assert learner.global_ctx is not None
    assert learner.global_ctx.grad is not None
    assert learner.local_ctx is not None
    assert learner.local_ctx.grad is not None
    assert float(learner.global_ctx.grad.abs().sum()) > 0
    assert all(p.grad is None for p in tiny_backbone.model.parameters())


def test_logits_use_clip_scale(tiny_backbone: Backbone) -> None:
    learner = PromptLearner(tiny_backbone, CLASSES, n_ctx=4)
    images = tiny_backbone.encode_images(torch.randn(2, 3, 32, 32))
    expected = tiny_backbone.logit_scale.exp() * images @ learner.text_features().T
    torch.testing.assert_close(learner.logits(images), expected)


def test_set_global_checks_shape_and_values(tiny_backbone: Backbone) -> None:
    learner = PromptLearner(tiny_backbone, CLASSES, n_ctx=4)
    values = np.arange(4 * 32, dtype=np.float64) / 100
    learner.set_global(values)
    np.testing.assert_allclose(learner.get_global().reshape(-1), values, rtol=1e-6)
    with pytest.raises(LearningConfigError, match="'global_prompt' must have 4 x 32 entries"):
        learner.set_global(np.zeros(5))
    with pytest.raises(LearningConfigError, match="finite"):
        learner.set_global(np.full(128, np.nan))


def test_class_name_too_long_for_context(tiny_backbone: Backbone) -> None:
    long_name = " ".join(["word"] * 30)
    with pytest.raises(LearningConfigError, match="more than the text context length 32"):
        PromptLearner(tiny_backbone, ["short", long_name], n_ctx=4)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"n_ctx": 0}, "'n_ctx' must be an integer in"),
        ({"n_ctx": 30}, "'n_ctx' must be an integer in"),
        ({"use_global": False, "use_local": False}, "'use_global' or 'use_local'"),
    ],
)
def test_invalid_settings(tiny_backbone: Backbone, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(LearningConfigError, match=message):
        PromptLearner(tiny_backbone, CLASSES, **kwargs)  # type: ignore[arg-type]
