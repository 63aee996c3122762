"""Decoding one image file into the RGB picture the backbone's preprocessing expects.

Both readers of a user's images use it: the participant's dataset
(:mod:`secfpp.participant.learning.data`) and the simulation's folder and CSV domains
(``demo/data/files.py``), so a federation trains on exactly what a simulation measured.

What a file becomes, in order:

1. **Upright**: the EXIF orientation a camera or phone recorded is applied (a portrait photo
   is stored as landscape pixels plus "rotate 90 degrees"; without this it would train
   sideways).
2. **Eight bits of grey**: a grey image of more than 8 bits is scaled, never clipped
   (``convert("RGB")`` alone clips a 16-bit image to white and a 0..1 float one to black):
   16-bit (modes ``I;16*``, and 32-bit integer ``I`` with values in ``0..65535``, which is how
   16-bit data arrives from some decoders) by ``v / 257`` (``65535 -> 255``), floating point
   (``F``) read as ``0..1`` (``v * 255``), both rounded to the nearest integer. A 32-bit image
   outside ``0..65535``, or a float image outside ``0..1`` or not finite, has no one 8-bit
   meaning and is refused (:class:`ImageRangeError`) instead of guessed.
3. **Opaque on white**: transparent pixels (``RGBA``, ``LA``, ``PA``, a palette with a
   transparent index) are composited on white paper, as a viewer shows them.
4. **RGB**: everything else (grey, palette, CMYK, 1-bit, YCbCr, ...) converted by Pillow.

An animated image gives its first frame. Pillow's decompression-bomb guard stays on: an
image of more than ``2 * Image.MAX_IMAGE_PIXELS`` pixels (about 179 million) is refused.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

__all__ = [
    "DECODING",
    "IMAGE_SUFFIXES",
    "ImageDecodeError",
    "ImageRangeError",
    "decode_image",
    "upright_rgb",
]

IMAGE_SUFFIXES = (
    ".png", ".jpg", ".jpeg", ".bmp", ".gif", ".tif", ".tiff", ".webp", ".ppm", ".pgm", ".pbm",
)  # fmt: skip
"""File name endings read as images (compared lower-cased)."""

DECODING = "images-v2"
"""Names the decoding rules above; part of the feature cache's key, so features computed
under earlier rules (v1: ``convert("RGB")`` only) are recomputed, not reused."""


class ImageDecodeError(ValueError):
    """A file that is not a readable image; the message says why, the caller names the file."""


class ImageRangeError(ImageDecodeError):
    """A grey image of more than 8 bits whose values have no one 8-bit meaning."""


def _eight_bit_grey(image: Image.Image) -> Image.Image:
    """A grey ``image`` of more than 8 bits (``I;16*``, ``I``, ``F``) as mode ``L``, scaled
    (module doc, step 2); any other image unchanged.

    Raises:
        ImageRangeError: a 32-bit integer image outside 0..65535, a float image outside 0..1
            or not finite.
    """
    if not (image.mode.startswith("I") or image.mode == "F"):
        return image
    values = np.asarray(image, dtype=np.float64)
    if not np.isfinite(values).all():
        raise ImageRangeError("a floating-point image with values that are not finite")
    low, high = float(values.min()), float(values.max())
    if image.mode == "F":
        if low < 0.0 or high > 1.0:
            raise ImageRangeError(
                f"a floating-point image with values in [{low:g}, {high:g}]; float images are "
                "read as 0..1: scale it, or save it with 8 or 16 bits"
            )
        scaled = values * 255.0
    else:
        if low < 0.0 or high > 65535.0:
            raise ImageRangeError(
                f"a 32-bit integer image with values in [{low:g}, {high:g}], outside 0..65535 "
                "(16 bits): save it with 8 or 16 bits"
            )
        scaled = values / 257.0
    return Image.fromarray(np.rint(scaled).astype(np.uint8), mode="L")


def upright_rgb(image: Image.Image) -> Image.Image:
    """``image`` upright, in 8 bits, opaque on white, as mode ``RGB`` (module doc, steps 1-4).

    Raises:
        ImageRangeError: see :func:`_eight_bit_grey`.
    """
    image = ImageOps.exif_transpose(image)
    image = _eight_bit_grey(image)
    if image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info):
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        image = Image.alpha_composite(white, rgba)
    return image.convert("RGB")


def decode_image(path: Path) -> Image.Image:
    """The image file ``path`` decoded in full and :func:`upright_rgb`.

    Raises:
        FileNotFoundError: no such file.
        ImageDecodeError: not a decodable image, too large (decompression-bomb guard), or an
            :class:`ImageRangeError`; the message does not name the file (callers do).
    """
    try:
        with Image.open(path) as image:
            image.load()
            return upright_rgb(image)
    except (FileNotFoundError, ImageDecodeError):
        raise  # already what the caller gets; the clauses below would rewrap them
    except Image.DecompressionBombError as exc:
        raise ImageDecodeError(f"too large an image ({exc})") from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ImageDecodeError(f"not a readable image ({exc})") from None
