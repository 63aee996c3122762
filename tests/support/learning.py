"""What the learning tests share: the tiny open_clip config and toy images on disk."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image

TINY = "tiny-test"
TINY_CONFIG = {
    "embed_dim": 32,
    "vision_cfg": {"image_size": 32, "layers": 1, "width": 32, "head_width": 32, "patch_size": 8},
    "text_cfg": {"context_length": 32, "vocab_size": 49408, "width": 32, "heads": 1, "layers": 1},
}
COLOURS = {"red": (220, 30, 30), "green": (30, 200, 40), "blue": (30, 40, 220)}


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
