"""Zero-shot classification with a CLIP model: class prompts as the classifier, no training.

For classes ``c = 1..C`` and templates ``t = 1..T`` the class weight is the renormalised mean of the
unit text embeddings, ``w_c = normalize(sum_t normalize(g(t(c))))``; an image with unit embedding
``f`` is assigned ``argmax_c <f, w_c>`` (cosine similarity; the logit scale does not change the
argmax). Used by ``scripts/pretrain_tiny_clip.py`` and the backbone tests alike.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Protocol

import numpy as np
import torch
from PIL import Image
from torch.nn.functional import normalize

__all__ = [
    "ClipModel",
    "class_text_features",
    "encode_images",
    "images_to_tensor",
    "zeroshot_accuracy",
    "zeroshot_predict",
]

Tokenizer = Callable[[list[str]], torch.Tensor]
Preprocess = Callable[[Image.Image], torch.Tensor]


class ClipModel(Protocol):
    """What zero-shot classification needs of a model: open_clip's two encoders."""

    def encode_image(self, image: torch.Tensor, normalize: bool = False) -> torch.Tensor: ...

    def encode_text(self, text: torch.Tensor, normalize: bool = False) -> torch.Tensor: ...

    def parameters(self, recurse: bool = True) -> Iterator[torch.nn.Parameter]: ...


def _device(model: ClipModel) -> torch.device:
    return next(model.parameters()).device


def images_to_tensor(images: np.ndarray, preprocess: Preprocess) -> torch.Tensor:
    """Apply open_clip's ``preprocess`` to ``(N, H, W, 3)`` uint8 images: ``(N, 3, S, S)`` float."""
    if images.ndim != 4 or images.shape[-1] != 3 or images.dtype != np.uint8:
        raise ValueError(
            "Argument 'images' must be a (N, H, W, 3) uint8 array, "
            f"not {images.dtype} of shape {images.shape}"
        )
    return torch.stack([preprocess(Image.fromarray(image)) for image in images])


@torch.no_grad()
def encode_images(model: ClipModel, pixels: torch.Tensor, *, batch_size: int = 256) -> torch.Tensor:
    """Unit image embeddings ``(N, D)`` of preprocessed ``pixels`` ``(N, 3, S, S)``, in batches."""
    device = _device(model)
    features = [
        model.encode_image(pixels[start : start + batch_size].to(device), normalize=True)
        for start in range(0, len(pixels), batch_size)
    ]
    return torch.cat(features).float()


@torch.no_grad()
def class_text_features(
    model: ClipModel,
    tokenizer: Tokenizer,
    class_names: Sequence[str],
    templates: Sequence[str],
) -> torch.Tensor:
    """Zero-shot classifier ``(C, D)``: per class, the renormalised mean over ``templates``.

    Each template contains ``{}`` where the class name goes, e.g. ``"a photo of the digit {}."``.
    """
    if not templates:
        raise ValueError("Argument 'templates' must hold at least one template, not none")
    prompts = [template.format(name) for name in class_names for template in templates]
    tokens = tokenizer(prompts).to(_device(model))
    text = model.encode_text(tokens, normalize=True).float()
    text = text.reshape(len(class_names), len(templates), -1).mean(dim=1)
    return normalize(text, dim=-1)


def zeroshot_predict(image_features: torch.Tensor, text_features: torch.Tensor) -> torch.Tensor:
    """Predicted class index ``(N,)``: the class weight with the largest cosine similarity."""
    return (image_features @ text_features.T).argmax(dim=-1)


def zeroshot_accuracy(
    model: ClipModel,
    tokenizer: Tokenizer,
    pixels: torch.Tensor,
    labels: np.ndarray | torch.Tensor,
    class_names: Sequence[str],
    templates: Sequence[str],
    *,
    batch_size: int = 256,
) -> float:
    """Fraction of ``pixels`` (preprocessed, ``(N, 3, S, S)``) whose zero-shot class is ``labels``.

    ``model`` should be in eval mode; nothing is trained.
    """
    text_features = class_text_features(model, tokenizer, class_names, templates)
    image_features = encode_images(model, pixels, batch_size=batch_size)
    predicted = zeroshot_predict(image_features, text_features).cpu()
    truth = torch.tensor(np.asarray(labels), dtype=torch.long)  # a copy: labels may be read-only
    return float((predicted == truth).float().mean())
