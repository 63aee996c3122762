"""Domains from a user's files: a folder of class folders, or a CSV file.

**Folder** ``ROOT/<class>/<image>``: one sub-folder per class (the folder's name is the class
name, as prompts will say it), any number of images in each, in any format Pillow reads (PNG,
JPEG, BMP, GIF, TIFF, WebP, PPM/PGM), of any size and colour mode. Hidden entries (``.*``) are
skipped; anything else (a file directly in ``ROOT``, a file with another extension, an image
that does not decode) is refused, with the file named.

**CSV**, header required, one of two layouts:

* ``path,label``: one image file per row, ``path`` relative to the CSV file's folder (or
  absolute); read as in a folder domain;
* ``label,pixel0,pixel1,...`` (or ``pixel1,...``, counted from 1 as in the Fashion-MNIST CSVs):
  the image itself, ``S*S`` grey values (row-major, as the MNIST CSVs) or ``S*S*3`` RGB values
  (row-major, ``r,g,b`` per pixel), integers 0..255.

The file is UTF-8, with or without the byte-order mark spreadsheets write.

A bad row (wrong number of columns, an empty label, a value that is not an integer in 0..255, a
missing or unreadable file) is refused with the file and its line number (the header is line 1).

**Images** are decoded as a participant's daemon decodes them
(:mod:`secfpp.participant.learning.images`: upright by their EXIF orientation, grey of more
than 8 bits scaled to 8, transparent pixels composited on white, RGB; a 32-bit or float image
whose range has no one meaning, or one past Pillow's decompression-bomb limit, is refused with
the file named), then, as the backbone's preprocess would, the shorter side resized to
:data:`demo.data.IMAGE_SIZE` (bicubic) and centre-cropped to a square: ``(IMAGE_SIZE,
IMAGE_SIZE, 3)`` uint8.

**Splits**: per class, a seeded permutation (``default_rng([seed, crc32(domain name), class])``)
holds out ``round(0.2 * n)`` of the class's ``n`` images as the test split, at least one, and
keeps at least one for training; so every class needs two images or more. A domain needs at
least two classes, and no class may be empty. Different domains may have different class sets:
each domain is its own task (a participant classifies among its domain's classes).
"""

from __future__ import annotations

import csv
import functools
import zlib
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image

from demo.data.base import IMAGE_SIZE, USER, DomainData, DomainSpec, Split, check_split
from secfpp.participant.learning.images import (
    IMAGE_SUFFIXES,
    ImageDecodeError,
    decode_image,
    upright_rgb,
)

__all__ = [
    "IMAGE_EXTENSIONS",
    "TEST_FRACTION",
    "DomainLoadError",
    "csv_domain",
    "fit_image",
    "folder_domain",
    "read_image",
]

IMAGE_EXTENSIONS = frozenset(IMAGE_SUFFIXES)
TEST_FRACTION = 0.2

#: (images (N, S, S, 3) uint8, labels (N,) int64, class names, sources (N,) str)
_Decoded = tuple[np.ndarray, np.ndarray, tuple[str, ...], np.ndarray]


class DomainLoadError(ValueError):
    """A folder or CSV file is not a valid domain; the message names the file (and row)."""


def fit_image(image: Image.Image, size: int = IMAGE_SIZE) -> np.ndarray:
    """``image`` as ``(size, size, 3)`` uint8 RGB: :func:`~secfpp.participant.learning.images.
    upright_rgb` (upright, 8 bits, opaque on white), shorter side resized to ``size``
    (bicubic), centre crop.

    Raises:
        ImageRangeError: a grey image of more than 8 bits whose range has no one meaning.
    """
    return _resize_crop(upright_rgb(image), size)


def _resize_crop(image: Image.Image, size: int) -> np.ndarray:
    """An RGB ``image``, shorter side resized to ``size`` (bicubic), centre-cropped."""
    width, height = image.size
    scale = size / min(width, height)
    new = (max(size, round(width * scale)), max(size, round(height * scale)))
    image = image.resize(new, Image.Resampling.BICUBIC)
    left, top = (new[0] - size) // 2, (new[1] - size) // 2
    return np.asarray(image.crop((left, top, left + size, top + size)), dtype=np.uint8)


def read_image(path: Path, size: int = IMAGE_SIZE, *, where: str | None = None) -> np.ndarray:
    """Decode the image file ``path`` and :func:`fit_image` it.

    Raises:
        DomainLoadError: missing, unreadable, or not a decodable image (``where`` prefixes the
            message, e.g. a CSV file and row).
    """
    prefix = f"{where}: " if where else ""
    try:
        return _resize_crop(decode_image(path), size)
    except FileNotFoundError:
        raise DomainLoadError(f"{prefix}{path}: no such image file") from None
    except ImageDecodeError as exc:
        raise DomainLoadError(f"{prefix}{path}: {exc}") from None


def _split(name: str, labels: np.ndarray, n_classes: int, split: Split, seed: int) -> np.ndarray:
    """Indices of ``split``: per class a seeded permutation, ``round(0.2 n)`` (>= 1) held out."""
    check_split(split)
    rng = np.random.default_rng([seed, zlib.crc32(name.encode()), 0])
    test = np.zeros(len(labels), dtype=bool)
    for c in range(n_classes):
        members = np.flatnonzero(labels == c)
        n_test = min(max(1, round(TEST_FRACTION * len(members))), len(members) - 1)
        test[rng.permutation(members)[:n_test]] = True
    return np.flatnonzero(test if split == "test" else ~test)


def _check_classes(where: str, class_names: Sequence[str], labels: np.ndarray) -> None:
    if len(class_names) < 2:
        raise DomainLoadError(
            f"{where}: a domain needs at least two classes, found {len(class_names)} "
            f"({', '.join(class_names) or 'none'})"
        )
    counts = np.bincount(labels, minlength=len(class_names))
    few = [f"{n} ({int(k)})" for n, k in zip(class_names, counts, strict=True) if k < 2]
    if few:
        raise DomainLoadError(
            f"{where}: every class needs at least two images (one to train, one to test); "
            f"too few in: {', '.join(few)}"
        )


class _Arrays:
    """A domain's decoded images, labels and sources (read-only), and its splits."""

    def __init__(
        self,
        name: str,
        images: np.ndarray,
        labels: np.ndarray,
        class_names: tuple[str, ...],
        sources: np.ndarray,
    ) -> None:
        for array in (images, labels, sources):
            array.flags.writeable = False
        self.name, self.images, self.labels = name, images, labels
        self.class_names, self.sources = class_names, sources

    def load(self, split: Split = "train", *, seed: int = 0) -> DomainData:
        keep = _split(self.name, self.labels, len(self.class_names), split, seed)
        return DomainData(
            domain=self.name,
            images=self.images[keep],
            labels=self.labels[keep].copy(),
            class_names=self.class_names,
            sources=self.sources[keep].copy(),
        )


@functools.lru_cache(maxsize=16)
def _read_folder(root: Path, size: int) -> _Decoded:
    if not root.is_dir():
        raise DomainLoadError(f"{root}: not a folder")
    classes: list[str] = []
    images: list[np.ndarray] = []
    labels: list[int] = []
    sources: list[str] = []
    for entry in sorted(root.iterdir()):
        if entry.name.startswith("."):
            continue
        if not entry.is_dir():
            raise DomainLoadError(
                f"{entry}: a domain folder holds only class folders (ROOT/<class>/<image>)"
            )
        files = sorted(f for f in entry.iterdir() if not f.name.startswith("."))
        if not files:
            raise DomainLoadError(
                f"{entry}: empty class folder (class {entry.name!r} has no images)"
            )
        label = len(classes)
        classes.append(entry.name)
        for file in files:
            if file.is_dir() or file.suffix.lower() not in IMAGE_EXTENSIONS:
                raise DomainLoadError(
                    f"{file}: not an image file (a class folder holds only "
                    f"{', '.join(sorted(IMAGE_EXTENSIONS))})"
                )
            images.append(read_image(file, size))
            labels.append(label)
            sources.append(f"{entry.name}/{file.name}")
    labels_array = np.array(labels, dtype=np.int64)
    _check_classes(str(root), classes, labels_array)
    return np.stack(images), labels_array, tuple(classes), np.array(sources)


def folder_domain(
    name: str,
    root: Path | str,
    *,
    prompt_template: str = "a photo of a {}.",
    size: int = IMAGE_SIZE,
) -> DomainSpec:
    """A :data:`~demo.data.base.USER` domain from ``root/<class>/<image>`` (module docstring).

    Every image is decoded now (and cached), so a bad file is refused here, not mid-run.

    Raises:
        DomainLoadError: see the module docstring; the message names the folder or file.
    """
    root = Path(root).resolve()
    images, labels, classes, sources = _read_folder(root, size)
    arrays = _Arrays(name, images, labels, classes, sources)
    return DomainSpec(
        name, classes, prompt_template, arrays.load, role=USER, source=f"folder:{root}"
    )


def _pixel_image(values: list[str], where: str) -> np.ndarray:
    pixel_list = []
    for v in values:
        try:
            pixel_list.append(int(v))
        except ValueError:
            raise DomainLoadError(f"{where}: pixel value {v!r} is not an integer") from None
    pixels = np.array(pixel_list, dtype=np.int64)
    if pixels.min(initial=0) < 0 or pixels.max(initial=0) > 255:
        raise DomainLoadError(f"{where}: pixel values must lie in 0..255")
    n = len(pixels)
    side = round(n**0.5)
    if side * side == n:
        image = Image.fromarray(pixels.reshape(side, side).astype(np.uint8), mode="L")
    else:
        side = round((n / 3) ** 0.5)
        image = Image.fromarray(pixels.reshape(side, side, 3).astype(np.uint8), mode="RGB")
    return fit_image(image)


def _pixel_names(first: int, count: int) -> list[str]:
    """``pixel<first>, ..., pixel<first + count - 1>``: a pixel CSV's header after ``label``."""
    return [f"pixel{i}" for i in range(first, first + count)]


@functools.lru_cache(maxsize=16)
def _read_csv(path: Path, size: int) -> _Decoded:
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            rows = list(csv.reader(f))
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise DomainLoadError(f"{path}: cannot read the CSV file ({exc})") from None
    if not rows:
        raise DomainLoadError(f"{path}: empty CSV file (a header is required)")
    header = [h.strip().lower() for h in rows[0]]
    by_path = header == ["path", "label"]
    n_pixels = len(header) - 1
    side = round(n_pixels**0.5)
    side3 = round((n_pixels / 3) ** 0.5)
    by_pixels = (
        header[:1] == ["label"]
        and header[1:] in (_pixel_names(0, n_pixels), _pixel_names(1, n_pixels))
        and (side * side == n_pixels or 3 * side3 * side3 == n_pixels)
        and n_pixels > 0
    )
    if not by_path and not by_pixels:
        raise DomainLoadError(
            f"{path}, line 1: the header must be 'path,label' or 'label,pixel0,...,pixelK-1' "
            "(or 'label,pixel1,...,pixelK') "
            f"with K = S*S (grey) or S*S*3 (RGB) pixels; found {','.join(rows[0][:4])}"
            f"{',...' if len(rows[0]) > 4 else ''} ({len(rows[0])} columns)"
        )
    names: list[str] = []
    images: list[np.ndarray] = []
    sources: list[str] = []
    for line, row in enumerate(rows[1:], start=2):
        where = f"{path}, line {line}"
        if not row or all(not v.strip() for v in row):
            continue  # blank line
        if len(row) != len(header):
            raise DomainLoadError(f"{where}: {len(row)} columns, the header has {len(header)}")
        label = (row[1] if by_path else row[0]).strip()
        if not label:
            raise DomainLoadError(f"{where}: empty label")
        if by_path:
            file = Path(row[0].strip()).expanduser()
            if not file.is_absolute():
                file = path.parent / file
            images.append(read_image(file, size, where=where))
            sources.append(row[0].strip())
        else:
            images.append(_pixel_image(row[1:], where))
            sources.append(f"line {line}")
        names.append(label)
    classes = tuple(sorted(set(names)))
    index = {c: i for i, c in enumerate(classes)}
    labels = np.array([index[n] for n in names], dtype=np.int64)
    _check_classes(str(path), classes, labels)
    return np.stack(images), labels, classes, np.array(sources)


def csv_domain(
    name: str,
    path: Path | str,
    *,
    prompt_template: str = "a photo of a {}.",
    size: int = IMAGE_SIZE,
) -> DomainSpec:
    """A :data:`~demo.data.base.USER` domain from a CSV file (module docstring); class names are
    the labels, sorted. Every row is read now (and cached).

    Raises:
        DomainLoadError: see the module docstring; the message names the file and line.
    """
    path = Path(path).resolve()
    images, labels, classes, sources = _read_csv(path, size)
    arrays = _Arrays(name, images, labels, classes, sources)
    return DomainSpec(name, classes, prompt_template, arrays.load, role=USER, source=f"csv:{path}")
