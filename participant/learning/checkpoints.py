"""Refuse a checkpoint whose tensors do not have the shapes of the model it is loaded into.

open_clip loads a state dict of another architecture far enough to fail deep inside torch:
a ViT-L-14 checkpoint loaded as ViT-B-16 reaches the resize of the image position
embedding (16x16 patches -> 14x14) and ends in ``"upsample_bicubic2d" not implemented for
'Half'``, naming neither the model nor the file. :func:`check_checkpoint_shapes` compares
the shapes first: the model is built on torch's ``meta`` device (no memory, no init; about
0.1 s for ViT-L-14) and the checkpoint's tensors are read without their data (``mmap``
for torch files, the header for safetensors). Any tensor present in both with different
shapes refuses the load with :class:`BackboneLoadError` naming the model, the file and the
first mismatches.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import open_clip
import torch

from secfpp.participant.learning.errors import BackboneLoadError

__all__ = ["check_checkpoint_shapes", "checkpoint_shapes", "model_shapes"]

_SHOWN = 3
"""Mismatching tensors named in the message (the count says how many there are)."""


def _strip(key: str) -> str:
    """Key without the ``module.`` prefix DataParallel checkpoints carry (open_clip drops it)."""
    return key[len("module.") :] if key.startswith("module.") else key


def checkpoint_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Shapes of the tensors in the checkpoint ``path`` (torch file or ``.safetensors``).

    Reads no tensor data. Returns an empty dict when the file holds no state dict (the
    load itself then reports what the file is).
    """
    if path.suffix == ".safetensors":
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as handle:
            return {
                _strip(k): tuple(handle.get_slice(k).get_shape())
                for k in handle.keys()  # noqa: SIM118 - not iterable
            }
    try:
        content: Any = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # not a zip-format torch file: let open_clip's load say what it is
        return {}
    if isinstance(content, Mapping) and "state_dict" in content:
        content = content["state_dict"]
    if not isinstance(content, Mapping):
        return {}
    return {
        _strip(str(k)): tuple(v.shape) for k, v in content.items() if isinstance(v, torch.Tensor)
    }


def _not_open_clip(record: logging.LogRecord) -> bool:
    return f"{os.sep}open_clip{os.sep}" not in record.pathname


def model_shapes(name: str) -> dict[str, tuple[int, ...]]:
    """Shapes of the state dict of the open_clip model ``name``, built on ``meta``.

    open_clip's lines about this throw-away build ("Model initialized randomly") are
    dropped: the real load follows and logs what it loads.
    """
    root = logging.getLogger()
    root.addFilter(_not_open_clip)
    try:
        with torch.device("meta"):
            model = open_clip.create_model(name, pretrained=None, device="meta")
    finally:
        root.removeFilter(_not_open_clip)
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def check_checkpoint_shapes(path: Path, name: str, shown_as: str | None = None) -> None:
    """Raise :class:`BackboneLoadError` unless every tensor of ``path`` that the model
    ``name`` also has has the model's shape. ``shown_as``: the model's name in the message."""
    found = checkpoint_shapes(path)
    if not found:
        return
    expected = model_shapes(name)
    wrong = [
        f"{key} is {list(found[key])}, the model's is {list(shape)}"
        for key, shape in expected.items()
        if key in found and found[key] != shape
    ]
    if not wrong:
        return
    more = f" (and {len(wrong) - _SHOWN} more)" if len(wrong) > _SHOWN else ""
    raise BackboneLoadError(
        f"checkpoint {path} does not match model '{shown_as or name}': {len(wrong)} of its "
        f"tensors have other shapes: {'; '.join(wrong[:_SHOWN])}{more}. "
        f"Pass the checkpoint of '{shown_as or name}' with --pretrained, or the model "
        f"this checkpoint belongs to with --model"
    )
