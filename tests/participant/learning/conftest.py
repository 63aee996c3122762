"""Fixtures for the learning tests: a tiny registered open_clip config, toy images on disk.

Until ``secfpp.participant.backbones`` lands on main, the ``tiny-test`` architecture is registered
here from a copy of its JSON (same name, same numbers); afterwards the package's own
registration is used.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import open_clip
import pytest
import torch
from PIL import Image

from secfpp.participant.learning.backbone import Backbone, load_backbone

TINY = "tiny-test"
TINY_CONFIG = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 32, "patch_size": 8},
    "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 32, "heads": 1, "layers": 1},
}
COLOURS = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (30, 40, 220)}


@pytest.fixture(autouse=True, scope="session")
def _one_thread() -> None:
    torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tiny_model_name(tmp_path_factory: pytest.TempPathFactory) -> str:
    try:
        from secfpp.participant.backbones import register_offline_models
    except ImportError:
        if TINY not in open_clip.list_models():
            config_dir = tmp_path_factory.mktemp("model_configs")
            (config_dir / f"{TINY}.json").write_text(json.dumps(TINY_CONFIG))
            open_clip.add_model_config(config_dir)
    else:
        register_offline_models()
    return TINY


@pytest.fixture(scope="session")
def tiny_backbone(tiny_model_name: str) -> Backbone:
    return load_backbone(
        tiny_model_name, None, device="cpu", init_seed=0, allow_random_weights=True
    )


def write_toy_images(root: Path, per_class: int = 6, *, seed: int = 0) -> Path:
    """``root/<colour>/<i>.png``: 3 classes of noisy colour squares on a grey background."""
    rng = np.random.default_rng(seed)
    for name, colour in COLOURS.items():
        folder = root / name
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(per_class):
            image = np.full((32, 32, 3), 128, dtype=np.int16)
            top, left = rng.integers(0, 12, size=2)
            image[top : top + 20, left : left + 20] = colour
            image += rng.integers(-20, 21, size=image.shape, dtype=np.int16)
            Image.fromarray(np.clip(image, 0, 255).astype(np.uint8)).save(folder / f"{i}.png")
    return root


@pytest.fixture
def toy_folder(tmp_path: Path) -> Path:
    return write_toy_images(tmp_path / "images")
