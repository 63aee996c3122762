"""Fashion-MNIST (Xiao, Rasul and Vollgraf, 2017) from Debian's ``dataset-fashion-mnist`` package.

Ten kinds of clothing, 28x28 grayscale, white object on a black background: 60,000 official
training and 10,000 official test images (Zalando SE, MIT licence). Nothing is downloaded at run
time: the four IDX files come from the Debian package, found in this order:

1. ``$SECFPP_FASHION_MNIST_DIR`` when set (and then only there): either the folder that holds the
   four ``*-ubyte.gz`` files, or the root of a ``dpkg -x`` extraction of the package, i.e. the
   no-root install ``apt-get download dataset-fashion-mnist && dpkg -x dataset-fashion-mnist_*.deb
   DIR`` followed by ``export SECFPP_FASHION_MNIST_DIR=DIR``;
2. ``/usr/share/datasets/fashion-mnist``, where ``apt-get install dataset-fashion-mnist`` puts them.

When neither holds them, :class:`FashionMNISTNotInstalledError` says which command installs them.

Splits, per class ``c`` (10 classes): the training split is a seeded choice of 560 of the 6,000
official training images of ``c``, the test split a seeded choice of 140 of the 1,000 official
test images of ``c``, so 5,600 / 1,400 images, like the handwritten digits. The choice uses
``default_rng([seed, 3, s])`` with ``s = 0`` (train) or ``1`` (test). Test images come from the
official test file only, so no seed can put a test image into any training split (the backbone's
pretraining included). Images are zero-padded to ``(32, 32)`` (as the MNIST digits) and repeated
into three RGB channels.

Class names are what a caption says after "a photo of a": ``"t-shirt"`` .. ``"ankle boot"``
(the dataset's "T-shirt/top" reads as "t-shirt").
"""

from __future__ import annotations

import functools
import gzip
import os
from pathlib import Path

import numpy as np

from demo.data.base import IMAGE_SIZE, DomainData, Split, check_split, gray_to_rgb

__all__ = [
    "FASHION_DIR_ENV",
    "FASHION_NAMES",
    "INSTALL_COMMAND",
    "SYSTEM_DIR",
    "FashionMNISTNotInstalledError",
    "fashion_mnist",
    "fashion_mnist_dir",
]

FASHION_NAMES: tuple[str, ...] = (
    "t-shirt", "trouser", "pullover", "dress", "coat",
    "sandal", "shirt", "sneaker", "bag", "ankle boot",
)  # fmt: skip
FASHION_DIR_ENV = "SECFPP_FASHION_MNIST_DIR"
SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
INSTALL_COMMAND = "apt-get install -y dataset-fashion-mnist"
NO_ROOT_COMMAND = (
    "apt-get download dataset-fashion-mnist && "
    "dpkg -x dataset-fashion-mnist_*.deb DIR && "
    f"export {FASHION_DIR_ENV}=DIR"
)

#: The official files: (images, labels, number of images).
_FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", 60_000),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz", 10_000),
}
_PER_CLASS = {"train": 560, "test": 140}
_DOMAIN_CODE = 3  # handwritten 0, printed digits 1, printed letters 2
_SIDE = 28
_IDX_IMAGES = 0x00000803  # IDX magic: unsigned byte, 3 dimensions
_IDX_LABELS = 0x00000801  # unsigned byte, 1 dimension


class FashionMNISTNotInstalledError(FileNotFoundError):
    """The Fashion-MNIST files are in none of the searched folders; the message says the fix."""


def _candidates() -> list[Path]:
    configured = os.environ.get(FASHION_DIR_ENV)
    if configured:
        root = Path(configured)
        return [root, root / SYSTEM_DIR.relative_to("/")]
    return [SYSTEM_DIR]


def fashion_mnist_dir() -> Path:
    """The folder holding the four Fashion-MNIST files (see the module docstring for the search).

    Raises:
        FashionMNISTNotInstalledError: no searched folder holds all four files.
    """
    names = [name for images, labels, _ in _FILES.values() for name in (images, labels)]
    searched = _candidates()
    for folder in searched:
        if all((folder / name).is_file() for name in names):
            return folder
    raise FashionMNISTNotInstalledError(
        f"Fashion-MNIST is not installed: none of {[str(p) for p in searched]} holds "
        f"{', '.join(names)}. Install it with `{INSTALL_COMMAND}` (as root, after "
        f"`apt-get update`), or without root: `{NO_ROOT_COMMAND}`."
    )


def _read_idx(path: Path, magic: int, shape: tuple[int, ...]) -> np.ndarray:
    """An IDX file's uint8 payload, checked against its expected magic number and shape."""
    with gzip.open(path, "rb") as f:
        raw = f.read()
    header = np.frombuffer(raw, dtype=">u4", count=1 + len(shape))
    found = tuple(int(d) for d in header[1:])
    if int(header[0]) != magic or found != shape:
        raise ValueError(
            f"{path} is not the expected IDX file: magic {int(header[0]):#010x}, shape {found}; "
            f"expected {magic:#010x}, {shape}. Reinstall with `{INSTALL_COMMAND}`."
        )
    offset = 4 * (1 + len(shape))
    return np.frombuffer(raw, dtype=np.uint8, offset=offset).reshape(shape)


@functools.lru_cache(maxsize=2)
def _official(split: Split) -> tuple[np.ndarray, np.ndarray]:
    """One official file pair as (images (N, 28, 28) uint8, labels (N,) int64); read-only."""
    folder = fashion_mnist_dir()
    images_name, labels_name, count = _FILES[split]
    images = _read_idx(folder / images_name, _IDX_IMAGES, (count, _SIDE, _SIDE))
    labels = _read_idx(folder / labels_name, _IDX_LABELS, (count,)).astype(np.int64)
    if labels.max() >= len(FASHION_NAMES):
        raise ValueError(f"{folder / labels_name} holds label {labels.max()}, not 0..9")
    labels.flags.writeable = False
    return images, labels


def fashion_mnist(split: Split = "train", *, seed: int = 0) -> DomainData:
    """560 (train) or 140 (test) images per class, chosen by ``seed`` from the official split.

    Raises:
        ValueError: ``split`` is not ``"train"`` or ``"test"``.
        FashionMNISTNotInstalledError: the package's files are missing.
    """
    check_split(split)
    images, labels = _official(split)
    rng = np.random.default_rng([seed, _DOMAIN_CODE, 0 if split == "train" else 1])
    chosen = np.sort(
        np.concatenate(
            [
                rng.choice(np.flatnonzero(labels == c), _PER_CLASS[split], replace=False)
                for c in range(len(FASHION_NAMES))
            ]
        )
    )
    pad = (IMAGE_SIZE - _SIDE) // 2
    padded = np.pad(images[chosen], ((0, 0), (pad, pad), (pad, pad)))
    return DomainData(
        domain="fashion",
        images=gray_to_rgb(padded),
        labels=labels[chosen].copy(),
        class_names=FASHION_NAMES,
        sources=np.full(len(chosen), "fashion-mnist"),
    )
