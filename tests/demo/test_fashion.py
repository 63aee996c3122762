"""The Fashion-MNIST domain: finding the Debian files, reading IDX, seeded class-balanced splits.

Most tests run on stand-in IDX files written here (the official header and counts, every image
carrying its own row number and file in its pixels), so the search path, the reader and the
split rules are checked whether or not the package is installed. The tests on the real files
need ``dataset-fashion-mnist``: they skip without it, and fail under ``CI=true``.
"""

from __future__ import annotations

import gzip
import struct
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from demo.data import DOMAINS, IMAGE_SIZE, fashion, load_domain
from demo.data.fashion import (
    FASHION_DIR_ENV,
    FASHION_NAMES,
    INSTALL_COMMAND,
    FashionMNISTNotInstalledError,
    fashion_mnist,
    fashion_mnist_dir,
)

COUNTS = {"train": 60_000, "test": 10_000}
FILES = {
    "train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
    "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"),
}
TEST_FILE_MARK = 200  # pixel (27, 27) of every stand-in image of the official test file


def _write_idx(folder: Path, split: str, *, magic: int = 0x803) -> None:
    """Stand-in IDX files: image ``i`` holds ``i`` in pixels (0, 0..2), label ``i % 10``."""
    n = COUNTS[split]
    rows = np.arange(n)
    images = np.zeros((n, 28, 28), dtype=np.uint8)
    images[:, 0, 0] = rows % 256
    images[:, 0, 1] = (rows // 256) % 256
    images[:, 0, 2] = rows // 65_536
    images[:, 27, 27] = TEST_FILE_MARK if split == "test" else 0
    labels = (rows % 10).astype(np.uint8)
    images_name, labels_name = FILES[split]
    with gzip.open(folder / images_name, "wb", compresslevel=1) as f:
        f.write(struct.pack(">IIII", magic, n, 28, 28) + images.tobytes())
    with gzip.open(folder / labels_name, "wb", compresslevel=1) as f:
        f.write(struct.pack(">II", 0x801, n) + labels.tobytes())


def _row(images: np.ndarray) -> np.ndarray:
    """The stand-in row number of each (padded, RGB) image."""
    pixels = images[:, 2, 2:5, 0].astype(np.int64)
    return pixels[:, 0] + 256 * pixels[:, 1] + 65_536 * pixels[:, 2]


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A ``dpkg -x`` style root: ``<root>/usr/share/datasets/fashion-mnist/*.gz``."""
    root = tmp_path_factory.mktemp("dpkg-x")
    folder = root / "usr" / "share" / "datasets" / "fashion-mnist"
    folder.mkdir(parents=True)
    for split in COUNTS:
        _write_idx(folder, split)
    return root


@pytest.fixture
def use_stand_in(stand_in: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv(FASHION_DIR_ENV, str(stand_in))
    fashion._official.cache_clear()
    yield stand_in
    fashion._official.cache_clear()  # never leave stand-in arrays for the real-data tests


def test_environment_variable_accepts_a_dpkg_x_root_or_the_folder(
    use_stand_in: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = use_stand_in / "usr" / "share" / "datasets" / "fashion-mnist"
    assert fashion_mnist_dir() == folder
    monkeypatch.setenv(FASHION_DIR_ENV, str(folder))
    assert fashion_mnist_dir() == folder


def test_missing_files_name_the_install_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(FASHION_DIR_ENV, str(tmp_path))
    fashion._official.cache_clear()
    with pytest.raises(FashionMNISTNotInstalledError) as caught:
        fashion_mnist("test")
    message = str(caught.value)
    assert INSTALL_COMMAND in message
    assert "apt-get download dataset-fashion-mnist" in message
    assert "dpkg -x" in message
    assert FASHION_DIR_ENV in message
    assert str(tmp_path) in message
    assert isinstance(caught.value, FileNotFoundError)


def test_splits_are_class_balanced_and_come_from_their_official_file(use_stand_in: Path) -> None:
    train, test = fashion_mnist("train", seed=5), fashion_mnist("test", seed=5)
    assert (len(train), len(test)) == (5600, 1400)
    for split, data, per_class, mark in (
        ("train", train, 560, 0),
        ("test", test, 140, TEST_FILE_MARK),
    ):
        assert data.images.shape == (len(data), IMAGE_SIZE, IMAGE_SIZE, 3)
        assert data.images.dtype == np.uint8
        assert data.labels.dtype == np.int64
        assert np.bincount(data.labels).tolist() == [per_class] * 10
        rows = _row(data.images)
        assert len(set(rows.tolist())) == len(data)  # no image drawn twice
        assert np.array_equal(rows % 10, data.labels)  # each label is its row's label
        assert rows.max() < COUNTS[split]
        assert (data.images[:, 29, 29] == mark).all()  # 28x28 padded by 2 on each side
        assert (data.images[:, :2] == 0).all()
        assert (data.images[:, 30:] == 0).all()
        assert (data.images[..., 0] == data.images[..., 2]).all()
        assert data.class_names == FASHION_NAMES
        assert data.domain == "fashion"


def test_splits_are_a_pure_function_of_the_seed(use_stand_in: Path) -> None:
    first = fashion_mnist("train", seed=3)
    fashion._official.cache_clear()
    again = fashion_mnist("train", seed=3)
    other = fashion_mnist("train", seed=4)
    assert np.array_equal(first.images, again.images)
    assert np.array_equal(first.labels, again.labels)
    overlap = len(set(_row(first.images).tolist()) & set(_row(other.images).tolist()))
    # two seeded draws of 560 of 6,000 per class share about 560 * 560 / 6000 = 52 per class
    assert 10 * 30 < overlap < 10 * 80


def test_a_wrong_file_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for split in COUNTS:
        _write_idx(tmp_path, split, magic=0x802 if split == "train" else 0x803)
    monkeypatch.setenv(FASHION_DIR_ENV, str(tmp_path))
    fashion._official.cache_clear()
    with pytest.raises(ValueError, match="not the expected IDX file"):
        fashion_mnist("train")
    fashion._official.cache_clear()
    with pytest.raises(ValueError, match="Argument 'split'"):
        fashion_mnist("validation")  # type: ignore[arg-type]


def test_registered_with_clip_style_class_names() -> None:
    spec = DOMAINS["fashion"]
    assert spec.class_names[0] == "t-shirt"
    assert spec.class_names[9] == "ankle boot"
    assert spec.prompts()[7] == "a photo of a sneaker."
    other = {name for key, s in DOMAINS.items() if key != "fashion" for name in s.class_names}
    assert not other & set(FASHION_NAMES)  # a task of its own, not a relabelled one


@pytest.mark.usefixtures("fashion_mnist")
def test_real_files_known_answers() -> None:
    """The first ten labels of each official file, as the dataset's own README lists them."""
    fashion._official.cache_clear()
    _, train_labels = fashion._official("train")
    _, test_labels = fashion._official("test")
    assert train_labels[:10].tolist() == [9, 0, 0, 3, 0, 2, 7, 2, 5, 5]
    assert test_labels[:10].tolist() == [9, 2, 1, 1, 6, 1, 4, 6, 5, 7]
    data = load_domain("fashion", "test", seed=0)
    assert len(data) == 1400
    # white object on black, as the handwritten digits
    assert np.median(data.images[:, 0, 0]) == 0
    assert data.images.max() == 255
