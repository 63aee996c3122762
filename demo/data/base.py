"""What every offline image domain shares: the split names, one split's arrays, a domain's spec.

Every image is ``(32, 32, 3)`` uint8 RGB; labels index the domain's ``class_names``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = ["IMAGE_SIZE", "DomainData", "DomainSpec", "Split", "check_split", "gray_to_rgb"]

IMAGE_SIZE = 32
Split = Literal["train", "test"]


@dataclass(frozen=True)
class DomainSpec:
    """What a domain is: its classes, the natural zero-shot prompt for them, and its loader.

    ``prompt_template`` contains ``{}`` where the class name goes (CoOp's hand-crafted baseline).
    """

    name: str
    class_names: tuple[str, ...]
    prompt_template: str
    loader: Callable[..., DomainData]

    def load(self, split: Split = "train", *, seed: int = 0) -> DomainData:
        """One split of this domain (each loader's docstring says how splits are drawn)."""
        return self.loader(split, seed=seed)

    def prompts(self) -> list[str]:
        """One prompt per class, in label order."""
        return [self.prompt_template.format(name) for name in self.class_names]


@dataclass(frozen=True)
class DomainData:
    """One split of one domain.

    Attributes:
        domain: the domain's name (a key of :data:`demo.data.DOMAINS`).
        images: ``(N, 32, 32, 3)`` uint8 RGB.
        labels: ``(N,)`` int64, indices into ``class_names``.
        class_names: the domain's classes, in label order.
        sources: ``(N,)`` str, where each image came from (``"mnist"``, ``"sklearn"``, a font
            name, ``"fashion-mnist"``), for partitions that skew features across participants.
    """

    domain: str
    images: np.ndarray
    labels: np.ndarray
    class_names: tuple[str, ...]
    sources: np.ndarray

    def __len__(self) -> int:
        return int(self.labels.shape[0])

    def subset(self, indices: np.ndarray) -> DomainData:
        """The samples at ``indices`` (an index or boolean array), same domain and classes."""
        return DomainData(
            domain=self.domain,
            images=self.images[indices],
            labels=self.labels[indices],
            class_names=self.class_names,
            sources=self.sources[indices],
        )


def check_split(split: str) -> None:
    """Refuse any split but ``"train"`` and ``"test"``."""
    if split not in ("train", "test"):
        raise ValueError(f"Argument 'split' must be 'train' or 'test', not {split!r}")


def gray_to_rgb(gray: np.ndarray) -> np.ndarray:
    """``(N, H, W)`` uint8 -> ``(N, H, W, 3)`` uint8."""
    return np.repeat(gray[..., None], 3, axis=-1)
