"""A participant's labelled images: an image folder or a CSV, and its train/test split.

Two layouts are read:

* an image folder ``root/<class name>/<image>`` (class names are the directory names, sorted,
  unless a class list fixes them and their order); an image is a file ending in one of
  :data:`~secfpp.participant.learning.images.IMAGE_SUFFIXES` (PNG, JPEG, BMP, GIF, TIFF, WebP,
  PPM/PGM/PBM), other files and hidden ones are skipped;
* a CSV of ``path,label`` rows (an optional ``path,label`` header; paths relative to the CSV's
  directory; UTF-8 with or without a byte-order mark) with a class list that fixes the label
  order.

Each file is decoded by :func:`~secfpp.participant.learning.images.decode_image`: upright by
its EXIF orientation, grey of more than 8 bits scaled (not clipped) to 8, transparency on
white, RGB; a file it cannot decode is a :class:`DatasetError` naming the file.

Images are read lazily and returned after the backbone's eval preprocessing
(``(3, H, W)`` float tensors), so a dataset whose features are cached is never decoded. The
split is stratified per class and deterministic per participant: the same ``seed`` and
``participant_id`` give the same split on every run and machine.
"""

from __future__ import annotations

import csv
import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from secfpp.participant.learning.errors import DatasetError, LearningConfigError
from secfpp.participant.learning.images import IMAGE_SUFFIXES, ImageDecodeError, decode_image

__all__ = [
    "IMAGE_SUFFIXES",
    "ImageDataset",
    "Sample",
    "load_dataset",
    "read_class_list",
    "read_csv_dataset",
    "read_image_folder",
    "split_dataset",
]

_log = logging.getLogger(__name__)

Transform = Callable[[Any], torch.Tensor]


@dataclass(frozen=True)
class Sample:
    """One labelled image: its file and its class index in the dataset's class list."""

    path: Path
    label: int


class ImageDataset(Dataset[tuple[torch.Tensor, int]]):
    """Labelled images, preprocessed on access: ``dataset[i] -> ((3, H, W) tensor, label)``.

    ``source`` (where the samples came from) and ``split`` name the dataset in logs and in the
    feature cache's file names.
    """

    def __init__(
        self,
        samples: Sequence[Sample],
        classnames: Sequence[str],
        transform: Transform,
        *,
        source: str,
        split: str = "all",
    ) -> None:
        self.samples = tuple(samples)
        self.classnames = tuple(classnames)
        self.transform = transform
        self.source = source
        self.split = split

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        sample = self.samples[index]
        return self.transform(_open_image(sample.path)), sample.label

    @property
    def labels(self) -> torch.Tensor:
        """Class indices, ``(N,)`` int64."""
        return torch.tensor([s.label for s in self.samples], dtype=torch.int64)

    def subset(self, indices: Sequence[int], split: str) -> ImageDataset:
        """The samples at ``indices`` (in that order), named ``split``."""
        picked = [self.samples[i] for i in indices]
        return ImageDataset(
            picked, self.classnames, self.transform, source=self.source, split=split
        )

    def fingerprint(self, *, contents: bool = False) -> str:
        """sha256 (hex) over the class list and every sample's path, size, mtime and label.

        With ``contents`` the image bytes are hashed too (catches a rewrite that keeps size and
        mtime, at the cost of reading every file).
        """
        digest = hashlib.sha256()
        digest.update(("\x1f".join(self.classnames) + "\x1e").encode())
        for sample in self.samples:
            try:
                stat = sample.path.stat()
            except OSError as exc:
                raise DatasetError(
                    f"image {sample.path} cannot be read: {exc}", path=str(sample.path)
                ) from exc
            digest.update(
                f"{sample.path}|{stat.st_size}|{stat.st_mtime_ns}|{sample.label}\n".encode()
            )
            if contents:
                digest.update(hashlib.sha256(sample.path.read_bytes()).digest())
        return digest.hexdigest()


def _open_image(path: Path) -> Image.Image:
    """Decode ``path`` fully (:func:`~secfpp.participant.learning.images.decode_image`); errors
    name the file."""
    try:
        return decode_image(path)
    except (OSError, ImageDecodeError) as exc:
        raise DatasetError(f"image {path} cannot be read: {exc}", path=str(path)) from exc


def _is_image(path: Path) -> bool:
    return (
        path.is_file() and path.suffix.lower() in IMAGE_SUFFIXES and not path.name.startswith(".")
    )


def read_class_list(path: str | Path) -> list[str]:
    """Class names, one per line (blank lines and ``#`` comments skipped), in label order; the
    file is UTF-8, with or without a byte-order mark (Windows Notepad writes one)."""
    file = Path(path)
    try:
        lines = file.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise DatasetError(f"class list {file} cannot be read: {exc}", path=str(file)) from exc
    names = [line.strip() for line in lines if line.strip() and not line.strip().startswith("#")]
    _check_classnames(names, str(file))
    return names


def _check_classnames(classnames: Sequence[str], where: str) -> None:
    if not classnames:
        raise DatasetError(f"class list of {where} is empty", path=where)
    seen: set[str] = set()
    for name in classnames:
        if name in seen:
            raise DatasetError(f"class list of {where} names {name!r} twice", path=where)
        seen.add(name)


def read_image_folder(
    root: str | Path, *, transform: Transform, classnames: Sequence[str] | None = None
) -> ImageDataset:
    """Read ``root/<class name>/<image>`` (module doc: which files are images).

    Without ``classnames`` the classes are the sub-directories, sorted. With it, every
    sub-directory must be in the list and every listed class must have a directory.

    Raises:
        DatasetError: ``root`` is not a directory, has no class directories, a class directory
            holds no image, or a directory is not in the class list.
    """
    folder = Path(root)
    if not folder.is_dir():
        raise DatasetError(f"dataset directory {folder} does not exist", path=str(folder))
    directories = sorted(
        p.name for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")
    )
    if not directories:
        raise DatasetError(
            f"dataset directory {folder} has no class sub-directories", path=str(folder)
        )
    if classnames is None:
        classnames = directories
    _check_classnames(classnames, str(folder))
    index = {name: i for i, name in enumerate(classnames)}
    unknown = [d for d in directories if d not in index]
    if unknown:
        raise DatasetError(
            f"class directory {folder / unknown[0]} is missing from the class list "
            f"({len(classnames)} classes)",
            path=str(folder / unknown[0]),
        )
    samples: list[Sample] = []
    for name in classnames:
        class_dir = folder / name
        if not class_dir.is_dir():
            raise DatasetError(f"class {name!r} has no directory {class_dir}", path=str(class_dir))
        files = sorted(p for p in class_dir.iterdir() if _is_image(p))
        if not files:
            raise DatasetError(
                f"class directory {class_dir} is empty (expected {'/'.join(IMAGE_SUFFIXES)} files)",
                path=str(class_dir),
            )
        samples.extend(Sample(path, index[name]) for path in files)
    _log.info("read %d images in %d classes from %s", len(samples), len(classnames), folder)
    return ImageDataset(samples, classnames, transform, source=str(folder.resolve()))


def read_csv_dataset(
    csv_path: str | Path, *, transform: Transform, classnames: Sequence[str]
) -> ImageDataset:
    """Read ``path,label`` rows; ``label`` is a class name from ``classnames``.

    Raises:
        DatasetError: the CSV cannot be read, a row does not have two fields, an image file is
            missing, or a label is not in the class list (the message names file and line).
    """
    file = Path(csv_path)
    _check_classnames(classnames, str(file))
    index = {name: i for i, name in enumerate(classnames)}
    try:
        with file.open(newline="", encoding="utf-8-sig") as handle:
            rows = list(csv.reader(handle))
    except (OSError, csv.Error, UnicodeDecodeError) as exc:
        raise DatasetError(f"dataset CSV {file} cannot be read: {exc}", path=str(file)) from exc
    samples: list[Sample] = []
    for line, row in enumerate(rows, start=1):
        if not row or all(not field.strip() for field in row):
            continue
        if line == 1 and [f.strip().lower() for f in row] == ["path", "label"]:
            continue
        if len(row) != 2:
            raise DatasetError(
                f"{file}:{line}: expected 2 fields (path,label), found {len(row)}", path=str(file)
            )
        relative, label = row[0].strip(), row[1].strip()
        if label not in index:
            raise DatasetError(
                f"{file}:{line}: label {label!r} is not in the class list "
                f"({len(classnames)} classes)",
                path=str(file),
            )
        path = Path(relative) if Path(relative).is_absolute() else file.parent / relative
        if not path.is_file():
            raise DatasetError(f"{file}:{line}: image {path} does not exist", path=str(path))
        samples.append(Sample(path, index[label]))
    if not samples:
        raise DatasetError(f"dataset CSV {file} has no rows", path=str(file))
    _log.info("read %d images in %d classes from %s", len(samples), len(classnames), file)
    return ImageDataset(samples, classnames, transform, source=str(file.resolve()))


def load_dataset(
    path: str | Path, *, transform: Transform, classnames: Sequence[str] | None = None
) -> ImageDataset:
    """An image folder if ``path`` is a directory, else a CSV (which needs ``classnames``)."""
    location = Path(path)
    if location.is_dir():
        return read_image_folder(location, transform=transform, classnames=classnames)
    if classnames is None:
        raise LearningConfigError("classnames", f"is required to read the CSV dataset {location}")
    return read_csv_dataset(location, transform=transform, classnames=classnames)


def _split_seed(seed: int, participant_id: int | str) -> int:
    digest = hashlib.sha256(f"secfpp-split|{seed}|{participant_id}".encode()).digest()
    return int.from_bytes(digest[:8], "little")


def split_dataset(
    dataset: ImageDataset,
    *,
    test_fraction: float = 0.2,
    seed: int = 0,
    participant_id: int | str,
) -> tuple[ImageDataset, ImageDataset]:
    """Stratified, deterministic ``(train, test)`` split of ``dataset``.

    Per class with ``n_c`` samples, ``round(test_fraction * n_c)`` go to test, but a class keeps
    at least one training sample (and gets a test sample only when it has at least two). The
    shuffle is seeded by ``sha256(seed, participant_id)``; it is not secret.
    """
    if not 0.0 <= test_fraction < 1.0:
        raise LearningConfigError("test_fraction", f"must be in [0, 1), not {test_fraction}")
    rng = np.random.default_rng(_split_seed(seed, participant_id))
    labels = np.array([s.label for s in dataset.samples], dtype=np.int64)
    train: list[int] = []
    test: list[int] = []
    for label in range(len(dataset.classnames)):
        members = np.flatnonzero(labels == label)
        if members.size == 0:
            continue
        members = members[rng.permutation(members.size)]
        n_test = min(round(test_fraction * members.size), members.size - 1)
        test.extend(int(i) for i in members[:n_test])
        train.extend(int(i) for i in members[n_test:])
    return dataset.subset(sorted(train), "train"), dataset.subset(sorted(test), "test")
