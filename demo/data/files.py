"""Domains from a user's files: a folder of class folders, or a CSV file.

**Folder** ``ROOT/<class>/<image>``: one sub-folder per class (the folder's name is the class
name, as prompts will say it), any number of images in each, in any format Pillow reads (PNG,
JPEG, BMP, GIF, TIFF, WebP, PPM/PGM), of any size and colour mode. Hidden entries (``.*``) are
skipped; anything else (a file directly in ``ROOT``, a file with another extension, an image
that does not decode) is refused, with the file named.

**CSV**, header required, one of two layouts:

* ``path,label``: one image file per row, ``path`` relative to the CSV file's folder (or
  absolute); read as in a folder domain;
* ``label,pixel0,pixel1,...``: the image itself, ``S*S`` grey values (row-major, as the
  MNIST CSVs) or ``S*S*3`` RGB values (row-major, ``r,g,b`` per pixel), integers 0..255.

A bad row (wrong number of columns, an empty label, a value that is not an integer in 0..255, a
missing or unreadable file) is refused with the file and its line number (the header is line 1).

**Images** become what the backbone's preprocess would make of them: converted to RGB
(transparent pixels composited on white, grey repeated into three channels), the shorter side
resized to :data:`demo.data.IMAGE_SIZE` (bicubic), centre-cropped to a square:
``(IMAGE_SIZE, IMAGE_SIZE, 3)`` uint8.

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
from PIL import Image, UnidentifiedImageError

from demo.data.base import IMAGE_SIZE, USER, DomainData, DomainSpec, Split, check_split

__all__ = [
    "IMAGE_EXTENSIONS",
    "TEST_FRACTION",
    "DomainLoadError",
    "csv_domain",
    "fit_image",
    "folder_domain",
    "read_image",
]

IMAGE_EXTENSIONS = frozenset(
    {".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pbm"}
)
TEST_FRACTION = 0.2

#: (images (N, S, S, 3) uint8, labels (N,) int64, class names, sources (N,) str)
_Decoded = tuple[np.ndarray, np.ndarray, tuple[str, ...], np.ndarray]


class DomainLoadError(ValueError):
    """A folder or CSV file is not a valid domain; the message names the file (and row)."""


def fit_image(image: Image.Image, size: int = IMAGE_SIZE) -> np.ndarray:
    """``image`` as ``(size, size, 3)`` uint8 RGB: alpha composited on white, shorter side
    resized to ``size`` (bicubic), centre crop."""
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, rgba)
    image = image.convert("RGB")
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
        with Image.open(path) as image:
            image.load()
            return fit_image(image, size)
    except FileNotFoundError:
        raise DomainLoadError(f"{prefix}{path}: no such image file") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise DomainLoadError(f"{prefix}{path}: not a readable image ({exc})") from None


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
    try:
        pixels = np.array([int(v) for v in values], dtype=np.int64)
    except ValueError:
        bad = next(v for v in values if not v.strip().lstrip("-").isdigit())
        raise DomainLoadError(f"{where}: pixel value {bad!r} is not an integer") from None
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


@functools.lru_cache(maxsize=16)
def _read_csv(path: Path, size: int) -> _Decoded:
    try:
        with path.open(newline="", encoding="utf-8") as f:
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
        and header[1:] == [f"pixel{i}" for i in range(n_pixels)]
        and (side * side == n_pixels or 3 * side3 * side3 == n_pixels)
        and n_pixels > 0
    )
    if not by_path and not by_pixels:
        raise DomainLoadError(
            f"{path}, line 1: the header must be 'path,label' or 'label,pixel0,...,pixelK-1' "
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
