"""Decoding a user's image files (secfpp.participant.learning.images), and the daemon's
dataset reading them: what a federation trains on is what a simulation measured."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.data import read_csv_dataset, read_image_folder
from secfpp.participant.learning.errors import DatasetError
from secfpp.participant.learning.images import (
    ImageDecodeError,
    ImageRangeError,
    decode_image,
    upright_rgb,
)

RAMP16 = np.tile(np.linspace(0, 65535, 32).astype(np.uint16), (32, 1))
RAMP16_AS_8 = np.rint(RAMP16 / 257.0).astype(np.uint8)


@pytest.mark.parametrize("name", ["ramp16.png", "ramp16.tif"])
def test_16_bit_grey_files_are_scaled_to_eight_bits_not_clipped(tmp_path: Path, name: str) -> None:
    """``convert("RGB")`` alone clips a 16-bit ramp to white from value 256 on."""
    Image.fromarray(RAMP16).save(tmp_path / name)
    with Image.open(tmp_path / name) as image:
        assert image.mode.startswith("I")  # Pillow opens 16-bit grey as I;16 (or I)
    decoded = np.asarray(decode_image(tmp_path / name))
    assert decoded.shape == (32, 32, 3)
    assert (decoded == RAMP16_AS_8[:, :, None]).all()


def test_32_bit_integer_and_float_images_map_their_range() -> None:
    as_int32 = Image.fromarray(RAMP16.astype(np.int32))
    assert as_int32.mode == "I"
    assert (np.asarray(upright_rgb(as_int32)) == RAMP16_AS_8[:, :, None]).all()
    ramp01 = np.tile(np.linspace(0.0, 1.0, 32, dtype=np.float32), (32, 1))
    decoded = np.asarray(upright_rgb(Image.fromarray(ramp01, mode="F")))
    assert (decoded == np.rint(ramp01 * 255.0).astype(np.uint8)[:, :, None]).all()


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (np.full((8, 8), 2.5, dtype=np.float32), r"floating-point image .* in \[2\.5, 2\.5\]"),
        (np.full((8, 8), -0.5, dtype=np.float32), r"values in \[-0\.5, -0\.5\]"),
        (np.full((8, 8), np.inf, dtype=np.float32), r"not finite"),
        (np.full((8, 8), -1, dtype=np.int32), r"32-bit integer image with values in \[-1, -1\]"),
    ],
)
def test_deep_images_without_one_meaning_are_refused(values: np.ndarray, message: str) -> None:
    with pytest.raises(ImageRangeError, match=message):
        upright_rgb(Image.fromarray(values))


def test_a_photo_is_upright_by_its_exif_orientation(tmp_path: Path) -> None:
    """A phone stores a portrait photo as landscape pixels and orientation 6 (rotate 90
    degrees clockwise to view)."""
    stored = np.zeros((32, 64, 3), dtype=np.uint8)
    stored[:, :32] = 255  # left half white as stored: upright (rotated clockwise) the top
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(stored).save(tmp_path / "portrait.jpg", exif=exif, quality=95)
    decoded = np.asarray(decode_image(tmp_path / "portrait.jpg"))
    assert decoded.shape == (64, 32, 3)
    assert decoded[:28].min() > 200
    assert decoded[36:].max() < 50


def test_transparency_is_white_paper_and_other_modes_become_rgb(tmp_path: Path) -> None:
    rgba = Image.new("RGBA", (8, 8), (0, 0, 0, 0))
    assert (np.asarray(upright_rgb(rgba)) == 255).all()
    for mode in ("1", "L", "P", "CMYK", "LA", "YCbCr"):
        assert upright_rgb(Image.new("RGB", (8, 8), (200, 10, 30)).convert(mode)).mode == "RGB"


def test_undecodable_and_too_large_files_say_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "broken.png").write_bytes(b"\x89PNG not really")
    with pytest.raises(ImageDecodeError, match="not a readable image"):
        decode_image(tmp_path / "broken.png")
    Image.new("L", (100, 100)).save(tmp_path / "big.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100 * 100 // 2 - 1)  # refused past twice
    with pytest.raises(ImageDecodeError, match="too large an image"):
        decode_image(tmp_path / "big.png")
    with pytest.raises(FileNotFoundError):
        decode_image(tmp_path / "missing.png")


def test_the_daemons_dataset_reads_every_format_and_scales_deep_grey(
    tmp_path: Path, tiny_backbone: Backbone
) -> None:
    """WebP, BMP and TIFF files were skipped (only .png/.jpg/.jpeg were read), and a 16-bit
    PNG trained as a white square."""
    root = tmp_path / "images"
    for name, colour in (("red", (220, 20, 20)), ("blue", (20, 20, 220))):
        (root / name).mkdir(parents=True)
        for suffix in (".png", ".webp", ".bmp", ".tif"):
            Image.new("RGB", (16, 16), colour).save(root / name / f"a{suffix}", lossless=True)
        (root / name / "notes.txt").write_text("not an image: skipped")
    Image.fromarray(RAMP16).save(root / "blue" / "deep.png")
    dataset = read_image_folder(root, transform=tiny_backbone.preprocess)
    assert sorted(s.path.name for s in dataset.samples if s.label == 0) == [
        "a.bmp", "a.png", "a.tif", "a.webp", "deep.png",
    ]  # fmt: skip
    deep = next(i for i, s in enumerate(dataset.samples) if s.path.name == "deep.png")
    expected = tiny_backbone.preprocess(Image.fromarray(RAMP16_AS_8).convert("RGB"))
    assert torch.equal(dataset[deep][0], expected)
    broken = root / "red" / "b.png"
    broken.write_bytes(b"\x89PNG not really")
    dataset = read_image_folder(root, transform=tiny_backbone.preprocess)
    index = next(i for i, s in enumerate(dataset.samples) if s.path == broken)
    with pytest.raises(DatasetError, match=r"image .*red/b\.png cannot be read: not a readable"):
        dataset[index]


def test_the_daemons_csv_may_carry_a_byte_order_mark(tmp_path: Path) -> None:
    """Excel's "CSV UTF-8" starts with a byte-order mark: the header was read as a row, and
    its label 'label' refused as not in the class list."""
    Image.new("RGB", (8, 8)).save(tmp_path / "a.png")
    (tmp_path / "data.csv").write_bytes("path,label\r\na.png,red\r\n".encode("utf-8-sig"))
    dataset = read_csv_dataset(tmp_path / "data.csv", transform=lambda x: x, classnames=["red"])
    assert [s.path.name for s in dataset.samples] == ["a.png"]


def test_a_class_list_from_notepad_is_read_and_latin_1_is_named(tmp_path: Path) -> None:
    from secfpp.participant.learning.data import read_class_list

    (tmp_path / "classes.txt").write_bytes("red\r\ngrün\r\n".encode("utf-8-sig"))
    assert read_class_list(tmp_path / "classes.txt") == ["red", "grün"]
    (tmp_path / "latin.txt").write_bytes("red\ngrün\n".encode("latin-1"))
    with pytest.raises(DatasetError, match=r"class list .*latin\.txt cannot be read: 'utf-8'"):
        read_class_list(tmp_path / "latin.txt")


def test_an_exported_model_decodes_images_as_training_did(
    tmp_path: Path, tiny_backbone: Backbone
) -> None:
    """``PersonalizedClassifier`` took in-memory and mixed inputs through ``convert("RGB")``
    (a 16-bit image white, a portrait photo sideways) while files went through the dataset."""
    from secfpp.participant.personalized import PersonalizedClassifier, PromptFile

    prompt = PromptFile(
        ctx=torch.zeros(4, tiny_backbone.text.width),
        model=tiny_backbone.name,
        weights_sha256=tiny_backbone.fingerprint,
        classnames=("a", "b"),
        ctx_init=None,
        info={},
    )
    classifier = PersonalizedClassifier(prompt, tiny_backbone)
    Image.fromarray(RAMP16).save(tmp_path / "deep.png")
    stored = np.zeros((32, 64, 3), dtype=np.uint8)
    stored[:, :32] = 255
    exif = Image.Exif()
    exif[0x0112] = 6
    Image.fromarray(stored).save(tmp_path / "portrait.png", exif=exif)
    files = [tmp_path / "deep.png", tmp_path / "portrait.png"]
    by_path = classifier.features(files)
    with Image.open(files[0]) as deep, Image.open(files[1]) as portrait:
        in_memory = classifier.features([deep, portrait])
        mixed = classifier.features([deep, files[1]])
    torch.testing.assert_close(in_memory, by_path)
    torch.testing.assert_close(mixed, by_path)
    white = classifier.features([Image.new("RGB", (32, 32), (255, 255, 255))])
    assert not torch.allclose(by_path[:1], white, atol=1e-3)
