"""Prompt initialisation from a phrase (``ctx_init``) and the EOT-truncated text encoder."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from secfpp.participant.learning import get_strategy
from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.prompt_learner import PromptLearner

CLASSES = ("red", "green", "light_blue")


def _encode(backbone: Backbone, prompts: list[str]) -> torch.Tensor:
    tokens = backbone.tokenizer(prompts)
    encoded: torch.Tensor = backbone.model.encode_text(tokens, normalize=True)  # type: ignore[operator]
    return encoded.float()


def test_ctx_init_starts_at_the_hand_written_prompt(tiny_backbone: Backbone) -> None:
    """With G = L = 0 the learner's classifier is open_clip's for "a photo of a {name}."."""
    learner = PromptLearner(tiny_backbone, CLASSES, n_ctx=4, ctx_init="a photo of a", init_std=0)
    expected = _encode(tiny_backbone, [f"a photo of a {c.replace('_', ' ')}." for c in CLASSES])
    torch.testing.assert_close(learner.text_features(), expected)
    # The base is not a parameter, not in the state dict, and not in the protocol's view.
    assert set(learner.state_dict()) == {"global_ctx", "local_ctx"}
    np.testing.assert_array_equal(learner.context().detach().numpy(), np.zeros((4, 32)))


def test_ctx_init_base_is_added_to_the_learned_context(tiny_backbone: Backbone) -> None:
    """``B + G + L`` with ``B`` the phrase's token embeddings: an explicit context equal to the
    phrase's embeddings minus ``B`` gives the phrase's features."""
    plain = PromptLearner(tiny_backbone, CLASSES, n_ctx=4)
    based = PromptLearner(tiny_backbone, CLASSES, n_ctx=4, ctx_init="a photo of a")
    ids = tiny_backbone.tokenizer(["a photo of a"])[0, 1:5]
    phrase = tiny_backbone.text.token_embedding.weight[ids].detach()
    offset = torch.randn(4, 32, generator=torch.Generator().manual_seed(1)) * 0.1
    torch.testing.assert_close(based.base_ctx, phrase)
    torch.testing.assert_close(
        based.text_features(offset), plain.text_features(phrase + offset), rtol=1e-5, atol=1e-6
    )


@pytest.mark.parametrize("phrase", ["a photo of", "a photo of a red", "   "])
def test_ctx_init_must_have_n_ctx_tokens(tiny_backbone: Backbone, phrase: str) -> None:
    with pytest.raises(LearningConfigError, match=r"ctx_init.*n_ctx=4"):
        PromptLearner(tiny_backbone, CLASSES, n_ctx=4, ctx_init=phrase)


def test_strategy_passes_ctx_init(tiny_backbone: Backbone) -> None:
    strategy = get_strategy(
        "secfpp", backbone=tiny_backbone, classnames=CLASSES, n_ctx=4, ctx_init="a photo of a"
    )
    assert strategy.learner.ctx_init == "a photo of a"
    assert float(strategy.learner.base_ctx.abs().sum()) > 0
    with pytest.raises(LearningConfigError, match="ctx_init"):
        get_strategy("local", backbone=tiny_backbone, classnames=CLASSES, n_ctx=4, ctx_init=4)


def test_encoder_reads_only_up_to_the_last_eot(tiny_backbone: Backbone) -> None:
    """The truncated encoder equals the full-length one, values and gradients."""
    learner = PromptLearner(tiny_backbone, ("a", "light_blue_green_red"), n_ctx=3)
    full = tiny_backbone.text.context_length
    longest = int(learner.tokenized.argmax(dim=-1).max())
    assert learner.encode_length == longest + 1 < full
    ctx = (torch.randn(3, 32, generator=torch.Generator().manual_seed(2)) * 0.1).requires_grad_()
    short = learner.text_features(ctx)
    (grad_short,) = torch.autograd.grad(short[:, 0].sum(), ctx)
    learner.encode_length = full
    long = learner.text_features(ctx)
    (grad_long,) = torch.autograd.grad(long[:, 0].sum(), ctx)
    torch.testing.assert_close(short, long, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grad_short, grad_long, rtol=1e-4, atol=1e-6)
