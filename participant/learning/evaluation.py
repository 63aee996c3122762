"""Accuracy of a prompt on cached image features (the participant's held-out split)."""

from __future__ import annotations

import torch

from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.prompt_learner import PromptLearner

__all__ = ["accuracy"]


@torch.no_grad()
def accuracy(
    learner: PromptLearner,
    features: torch.Tensor,
    labels: torch.Tensor,
    *,
    ctx: torch.Tensor | None = None,
    batch_size: int = 4096,
) -> float:
    """Fraction of ``features`` (``(N, embed_dim)``, normalized) classified as ``labels`` ``(N,)``.

    Uses the learner's current context ``G + L`` unless ``ctx`` (``n_ctx x d``) is given. The
    text features are computed once; images go through in batches of ``batch_size``.
    """
    if features.ndim != 2 or labels.shape != (features.shape[0],):
        raise LearningConfigError(
            "features",
            f"must be (N, embed_dim) with (N,) labels, not {tuple(features.shape)} "
            f"and {tuple(labels.shape)}",
        )
    if features.shape[0] == 0:
        raise LearningConfigError("features", "must hold at least one sample")
    device = learner.backbone.device
    text = learner.text_features(ctx)  # (n_cls, embed_dim)
    correct = 0
    for start in range(0, features.shape[0], batch_size):
        batch = features[start : start + batch_size].to(device).float()
        predicted = (batch @ text.T).argmax(dim=1)  # logit scale > 0 does not change the argmax
        correct += int((predicted == labels[start : start + batch_size].to(device)).sum())
    return correct / int(features.shape[0])
