"""Render printed characters from the TrueType fonts that matplotlib ships.

The "printed" domain: one character per image, drawn with a DejaVu font (Sans, Serif, Mono; regular,
bold, oblique/italic), centred on its ink box, then jittered by a small random affine map and
downsampled with area averaging, as dark ink on light, slightly tinted paper with a little noise.
Every random choice comes from the ``rng`` passed in, so a rendering is a pure function of
(character, font, rng state).
"""

from __future__ import annotations

import functools
import math
from pathlib import Path

import matplotlib
import numpy as np
from PIL import Image, ImageDraw, ImageFont

__all__ = ["FONT_NAMES", "font_path", "render_glyph"]

#: DejaVu fonts (file stems) in matplotlib's ``mpl-data/fonts/ttf``; the Display cuts lack glyphs.
FONT_NAMES: tuple[str, ...] = (
    "DejaVuSans",
    "DejaVuSans-Bold",
    "DejaVuSans-Oblique",
    "DejaVuSans-BoldOblique",
    "DejaVuSerif",
    "DejaVuSerif-Bold",
    "DejaVuSerif-Italic",
    "DejaVuSerif-BoldItalic",
    "DejaVuSansMono",
    "DejaVuSansMono-Bold",
    "DejaVuSansMono-Oblique",
    "DejaVuSansMono-BoldOblique",
)

_SUPERSAMPLE = 2  # render at twice the output size, then area-average down
_EM_PER_CANVAS = 0.82  # font size in canvas heights: capitals then fill about 60% of the height
_MAX_ROTATION_DEG = 10.0
_MAX_SHEAR = 0.15
_SCALE_RANGE = (0.85, 1.1)
_MAX_SHIFT = 0.06  # in canvas widths


def font_path(name: str) -> Path:
    """Path of the matplotlib-shipped TrueType file ``name`` (a stem from :data:`FONT_NAMES`)."""
    if name not in FONT_NAMES:
        raise ValueError(f"Argument 'name' must be one of {FONT_NAMES}, not {name!r}")
    return Path(matplotlib.get_data_path()) / "fonts" / "ttf" / f"{name}.ttf"


@functools.lru_cache(maxsize=64)
def _font(name: str, size_px: int) -> ImageFont.FreeTypeFont:
    return ImageFont.truetype(str(font_path(name)), size_px)


def _affine_inverse(rng: np.random.Generator, canvas: int) -> tuple[float, ...]:
    """Random affine jitter about the canvas centre, as PIL's output-to-input coefficients.

    Forward map: x' = c + t + R(theta) @ Shear(k) @ (s * (x - c)); PIL wants its inverse
    ``(a, b, c, d, e, f)`` with input = (a x' + b y' + c, d x' + e y' + f).
    """
    theta = math.radians(rng.uniform(-_MAX_ROTATION_DEG, _MAX_ROTATION_DEG))
    shear = rng.uniform(-_MAX_SHEAR, _MAX_SHEAR)
    scale = rng.uniform(*_SCALE_RANGE)
    shift = rng.uniform(-_MAX_SHIFT, _MAX_SHIFT, size=2) * canvas
    rot = np.array([[math.cos(theta), -math.sin(theta)], [math.sin(theta), math.cos(theta)]])
    forward = rot @ np.array([[1.0, shear], [0.0, 1.0]]) * scale
    inverse = np.linalg.inv(forward)
    centre = np.full(2, canvas / 2.0)
    offset = centre - inverse @ (centre + shift)
    return (
        float(inverse[0, 0]), float(inverse[0, 1]), float(offset[0]),
        float(inverse[1, 0]), float(inverse[1, 1]), float(offset[1]),
    )  # fmt: skip


def render_glyph(char: str, font_name: str, rng: np.random.Generator, *, size: int) -> np.ndarray:
    """Render one character as a ``(size, size, 3)`` uint8 RGB image, dark ink on light paper.

    Args:
        char: a single character.
        font_name: a stem from :data:`FONT_NAMES`.
        rng: source of the affine jitter, ink and paper levels, tint and noise.
        size: output height and width in pixels.
    """
    if len(char) != 1:
        raise ValueError(f"Argument 'char' must be a single character, not {char!r}")
    canvas = size * _SUPERSAMPLE
    font = _font(font_name, round(_EM_PER_CANVAS * canvas))
    left, top, right, bottom = font.getbbox(char)
    ink_mask = Image.new("L", (canvas, canvas), 0)
    origin = (canvas / 2 - (left + right) / 2, canvas / 2 - (top + bottom) / 2)
    ImageDraw.Draw(ink_mask).text(origin, char, fill=255, font=font)
    ink_mask = ink_mask.transform(
        (canvas, canvas),
        Image.Transform.AFFINE,
        _affine_inverse(rng, canvas),
        resample=Image.Resampling.BICUBIC,
    )
    ink_mask = ink_mask.resize((size, size), Image.Resampling.BOX)

    coverage = np.asarray(ink_mask, dtype=np.float32)[..., None] / 255.0  # (size, size, 1)
    paper = rng.uniform(180.0, 255.0) + rng.uniform(-12.0, 12.0, size=3)
    ink = rng.uniform(0.0, 70.0) + rng.uniform(-8.0, 8.0, size=3)
    noise = rng.normal(0.0, rng.uniform(0.0, 6.0), size=(size, size, 3))
    pixels = paper * (1.0 - coverage) + ink * coverage + noise
    return np.clip(np.rint(pixels), 0, 255).astype(np.uint8)
