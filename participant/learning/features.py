"""Image features: computed once per dataset with the frozen image encoder, cached on disk.

The image encoder never trains, so a participant's images are encoded once and every epoch,
round and evaluation afterwards costs only text-encoder passes. A cache entry is valid for
exactly one combination of

* the backbone: its name and the sha256 of its weights (:attr:`Backbone.fingerprint`);
* the preprocessing: how a file is decoded (:data:`~secfpp.participant.learning.images.
  DECODING`) and the eval transform's description (memory addresses removed);
* the data: :meth:`ImageDataset.fingerprint` (class list, every file's path, size, mtime,
  label; optionally the bytes).

That key is stored inside the entry. The entry's file name depends only on the backbone name
and the dataset's source and split, so a changed dataset overwrites its stale entry instead of
accumulating files. Entries are written atomically (temporary file in the same directory,
fsync, ``os.replace``): a crash leaves the old entry or the new one, never half a file.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.data import ImageDataset
from secfpp.participant.learning.errors import LearningConfigError
from secfpp.participant.learning.images import DECODING

__all__ = [
    "FeatureCache",
    "FeatureSet",
    "atomic_torch_save",
    "compute_features",
    "feature_key",
    "preprocess_fingerprint",
]

_log = logging.getLogger(__name__)

_FORMAT = "secfpp-features-v1"
_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+")


@dataclass(frozen=True, eq=False)
class FeatureSet:
    """Cached image features of one dataset split.

    ``features``: ``(N, embed_dim)`` float32, L2-normalized, on the CPU; ``labels``: ``(N,)``
    int64; ``key``: the cache key they were computed under.
    """

    features: torch.Tensor
    labels: torch.Tensor
    classnames: tuple[str, ...]
    key: str

    def __len__(self) -> int:
        return int(self.labels.shape[0])


def preprocess_fingerprint(preprocess: Callable[..., Any]) -> str:
    """A stable description of the eval transform (``repr`` without memory addresses)."""
    return _ADDRESS.sub("", repr(preprocess))


def feature_key(backbone: Backbone, dataset: ImageDataset, *, hash_contents: bool = False) -> str:
    """sha256 (hex) of format, decoding, backbone name and weights, preprocessing and data
    fingerprint."""
    parts = (
        _FORMAT,
        DECODING,
        backbone.name,
        backbone.fingerprint,
        preprocess_fingerprint(dataset.transform),
        dataset.fingerprint(contents=hash_contents),
    )
    return hashlib.sha256("\x1f".join(parts).encode()).hexdigest()


@torch.no_grad()
def compute_features(
    backbone: Backbone, dataset: ImageDataset, *, batch_size: int = 64
) -> tuple[torch.Tensor, torch.Tensor]:
    """Encode every image: ``(N, embed_dim)`` float32 normalized features and ``(N,)`` labels."""
    if batch_size < 1:
        raise LearningConfigError("batch_size", f"must be >= 1, not {batch_size}")
    chunks: list[torch.Tensor] = []
    for start in range(0, len(dataset), batch_size):
        indices = range(start, min(start + batch_size, len(dataset)))
        images = torch.stack([dataset[i][0] for i in indices])  # (b, 3, H, W)
        chunks.append(backbone.encode_images(images).cpu())
    if not chunks:
        return torch.empty(0, backbone.embed_dim), torch.empty(0, dtype=torch.int64)
    return torch.cat(chunks), dataset.labels


def atomic_torch_save(obj: Any, path: Path) -> None:
    """``torch.save`` to a temporary file beside ``path``, fsync, then ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "wb") as file:
            torch.save(obj, file)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


class FeatureCache:
    """Disk (and in-process) cache of :class:`FeatureSet` s under ``root``.

    Args:
        root: directory of the cache files (created on demand).
        batch_size: images per image-encoder call when computing.
        hash_contents: key on image bytes too (see :meth:`ImageDataset.fingerprint`).
    """

    def __init__(
        self, root: str | Path, *, batch_size: int = 64, hash_contents: bool = False
    ) -> None:
        self.root = Path(root)
        self.batch_size = batch_size
        self.hash_contents = hash_contents
        self._memory: dict[str, FeatureSet] = {}

    def path_for(self, backbone: Backbone, dataset: ImageDataset) -> Path:
        """The entry file of this backbone name and dataset source/split."""
        slot = hashlib.sha256(f"{backbone.name}\x1f{dataset.source}\x1f{dataset.split}".encode())
        return self.root / f"{dataset.split}-{slot.hexdigest()[:32]}.pt"

    def get(self, backbone: Backbone, dataset: ImageDataset) -> FeatureSet:
        """The features of ``dataset``: from memory, else from disk, else computed and stored."""
        key = feature_key(backbone, dataset, hash_contents=self.hash_contents)
        cached = self._memory.get(key)
        if cached is not None:
            return cached
        path = self.path_for(backbone, dataset)
        loaded = self._load(path, key, dataset)
        if loaded is None:
            _log.info(
                "computing image features of %s (%s, %d images)",
                dataset.source,
                dataset.split,
                len(dataset),
            )
            features, labels = compute_features(backbone, dataset, batch_size=self.batch_size)
            atomic_torch_save(
                {
                    "format": _FORMAT,
                    "key": key,
                    "features": features,
                    "labels": labels,
                    "classnames": list(dataset.classnames),
                },
                path,
            )
            loaded = FeatureSet(features, labels, dataset.classnames, key)
        self._memory[key] = loaded
        return loaded

    def _load(self, path: Path, key: str, dataset: ImageDataset) -> FeatureSet | None:
        """The entry at ``path`` if it holds ``key``; None if absent, stale or unreadable."""
        if not path.is_file():
            return None
        try:
            entry = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as exc:  # a damaged entry is recomputed, not fatal
            _log.warning("feature cache entry %s is unreadable (%s); recomputing", path, exc)
            return None
        if not isinstance(entry, dict) or entry.get("format") != _FORMAT or entry.get("key") != key:
            _log.info("feature cache entry %s is stale; recomputing", path)
            return None
        features, labels = entry["features"], entry["labels"]
        if features.shape[0] != len(dataset) or labels.shape[0] != len(dataset):
            _log.warning("feature cache entry %s has the wrong length; recomputing", path)
            return None
        return FeatureSet(features, labels, tuple(entry["classnames"]), key)
