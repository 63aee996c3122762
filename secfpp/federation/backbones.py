"""The backbone a federation pins: open_clip model name and weights fingerprint.

Every participant must run the same frozen CLIP: prompts, updates and distances only mean
something in one text embedding space. The federation config names the model and the
SHA-256 fingerprint of its weights (``secfpp.participant.learning.backbone.state_fingerprint``:
over the loaded tensors, so that a ``.pt`` and a ``.safetensors`` copy of the same weights
agree); each daemon loads its copy, computes the fingerprint and refuses to train or share
when either differs (``docs/deployment.md``, "The federation's backbone").

The coordinator never imports torch or open_clip (docker/coordinator.Dockerfile): the text
widths it derives ``prompt.dim`` from, and the fingerprint of the shipped ``tiny-offline``
backbone, come from ``backbones.json`` beside this module, written by
``scripts/backbone_catalog.py`` from open_clip's model configs.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from secfpp.wire.backbone import DEFAULT_MODEL, MODEL_NAME_PATTERN, BackboneConfig

__all__ = [
    "DEFAULT_MODEL",
    "MODEL_NAME_PATTERN",
    "BackboneConfig",
    "default_backbone",
    "known_fingerprint",
    "text_width",
]

CATALOG = Path(__file__).resolve().parent / "backbones.json"


@functools.cache
def _catalog() -> dict[str, dict[str, Any]]:
    models: dict[str, dict[str, Any]] = json.loads(CATALOG.read_text())["models"]
    return models


def text_width(model: str) -> int | None:
    """The text transformer width of ``model`` (what ``prompt.dim`` must be); None when the
    coordinator does not know the model."""
    entry = _catalog().get(model)
    return None if entry is None else int(entry["text_width"])


def known_fingerprint(model: str) -> str | None:
    """The weights fingerprint of a backbone that ships with the project, else None."""
    entry = _catalog().get(model)
    return None if entry is None else entry.get("weights_sha256")


def default_backbone() -> BackboneConfig:
    """``tiny-offline`` with the fingerprint of its shipped weights."""
    fingerprint = known_fingerprint(DEFAULT_MODEL)
    assert fingerprint is not None, f"{CATALOG} lacks the fingerprint of {DEFAULT_MODEL}"
    return BackboneConfig(model=DEFAULT_MODEL, weights_sha256=fingerprint)
