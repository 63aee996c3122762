"""What every offline image domain shares: the split names, one split's arrays, a domain's spec.

Every image is ``(32, 32, 3)`` uint8 RGB; labels index the domain's ``class_names``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy as np

__all__ = [
    "HELD_OUT",
    "IMAGE_SIZE",
    "ROLES",
    "TUNING",
    "USER",
    "DomainData",
    "DomainSpec",
    "Split",
    "check_split",
    "gray_to_rgb",
]

IMAGE_SIZE = 32
Split = Literal["train", "test"]

#: A built-in domain the split rule's parameters may be chosen on (issue 29).
TUNING = "tuning"
#: A built-in domain kept out of every choice of parameters: only evaluated on.
HELD_OUT = "held-out"
#: A domain a user registered (a folder, a CSV, their own loader).
USER = "user"
ROLES = (TUNING, HELD_OUT, USER)


@dataclass(frozen=True)
class DomainSpec:
    """What a domain is: its classes, the natural zero-shot prompt for them, and its loader.

    ``prompt_template`` contains ``{}`` where the class name goes (CoOp's hand-crafted baseline).
    ``role`` is :data:`TUNING`, :data:`HELD_OUT` or :data:`USER`; ``pretrained`` says whether the
    shipped ``tiny-offline`` backbone was pretrained on this domain's training split;
    ``source`` says where the images come from (a folder or CSV path for user domains, so that
    registering the same path twice is recognised).
    """

    name: str
    class_names: tuple[str, ...]
    prompt_template: str
    loader: Callable[..., DomainData]
    role: str = USER
    pretrained: bool = False
    source: str = ""

    def __post_init__(self) -> None:
        if not self.name or any(c in self.name for c in "+@=/\\ \t\n"):
            raise ValueError(
                f"A domain name must be non-empty without '+', '@', '=', '/', '\\' or spaces, "
                f"not {self.name!r}"
            )
        if len(self.class_names) < 2:
            raise ValueError(
                f"Domain {self.name!r} needs at least two classes, not {list(self.class_names)}"
            )
        if len(set(self.class_names)) != len(self.class_names):
            raise ValueError(f"Domain {self.name!r} repeats a class name: {list(self.class_names)}")
        if "{}" not in self.prompt_template:
            raise ValueError(
                f"Domain {self.name!r}: prompt_template must contain '{{}}', "
                f"not {self.prompt_template!r}"
            )
        if self.role not in ROLES:
            raise ValueError(
                f"Domain {self.name!r}: role must be one of {ROLES}, not {self.role!r}"
            )

    def load(self, split: Split = "train", *, seed: int = 0) -> DomainData:
        """One split of this domain (each loader's docstring says how splits are drawn).

        A built-in domain's split is made once per process and kept (:func:`_loaded`; its
        arrays read-only): rendering one costs 1-3 s of CPU, and a run loads the same split
        for every seed, method and partition. A user's loader is called every time (folder
        and CSV domains keep their own decoded files)."""
        if self.role == USER:
            return self.loader(split, seed=seed)
        return _loaded(self.name, self.loader, split, seed)

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


@functools.lru_cache(maxsize=12)
def _loaded(name: str, loader: Callable[..., DomainData], split: Split, seed: int) -> DomainData:
    """``loader(split, seed=seed)`` with its arrays made read-only, once per process (a built-in
    loader is deterministic in its arguments). Read-only, so that no caller can change what
    the next one gets: one that needs to write takes a copy (``subset`` does)."""
    data = loader(split, seed=seed)
    for array in (data.images, data.labels, data.sources):
        array.flags.writeable = False
    return data


def check_split(split: str) -> None:
    """Refuse any split but ``"train"`` and ``"test"``."""
    if split not in ("train", "test"):
        raise ValueError(f"Argument 'split' must be 'train' or 'test', not {split!r}")


def gray_to_rgb(gray: np.ndarray) -> np.ndarray:
    """``(N, H, W)`` uint8 -> ``(N, H, W, 3)`` uint8."""
    return np.repeat(gray[..., None], 3, axis=-1)
