"""Domains from a user's folders and CSV files, the domain registry, and setting texts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from demo.data import (
    DOMAINS,
    HELD_OUT,
    IMAGE_SIZE,
    PRETRAINING_DOMAINS,
    TUNING,
    USER,
    DomainData,
    DomainLoadError,
    DomainSpec,
    csv_domain,
    domains_with_role,
    folder_domain,
    load_domain,
    register_domain,
    resolve_domain,
    unregister_domain,
)
from demo.data.files import fit_image
from demo.partition import SETTINGS, resolve_setting, setting_partition


def _image(mode: str, size: tuple[int, int], value: int) -> Image.Image:
    """A flat image of one grey ``value`` (alpha 0 in the left half for RGBA)."""
    if mode == "L":
        return Image.new("L", size, value)
    if mode == "RGBA":
        image = Image.new("RGBA", size, (value, value, value, 255))
        image.paste((0, 0, 0, 0), (0, 0, size[0] // 2, size[1]))
        return image
    return Image.new("RGB", size, (value, value, value))


def write_folder(root: Path, classes: dict[str, int], *, per_class: int = 3) -> Path:
    """``root/<class>/<n>.png|jpg`` images of mixed sizes and modes; class ``c`` is grey
    ``classes[c]``."""
    shapes = [("RGB", (40, 30), ".png"), ("L", (17, 64), ".jpg"), ("RGBA", (33, 33), ".png")]
    for name, value in classes.items():
        folder = root / name
        folder.mkdir(parents=True)
        for k in range(per_class):
            mode, size, ext = shapes[k % len(shapes)]
            _image(mode, size, value).save(folder / f"{k}{ext}")
    return root


@pytest.fixture
def registered() -> Iterator[list[str]]:
    """Names registered by the test; unregistered afterwards."""
    names: list[str] = []
    yield names
    for name in names:
        if name in DOMAINS:
            unregister_domain(name)


def test_fit_image_converts_every_mode_and_size_to_the_backbone_input() -> None:
    grey = fit_image(Image.new("L", (64, 17), 80))
    assert grey.shape == (IMAGE_SIZE, IMAGE_SIZE, 3)
    assert grey.dtype == np.uint8
    assert (grey == 80).all()
    rgba = fit_image(_image("RGBA", (64, 64), 10))
    assert (rgba[:, :14] == 255).all()  # transparent half: white paper
    assert (rgba[:, 18:] == 10).all()
    # shorter side to 32, centre crop: a wide image keeps its middle columns
    wide = np.zeros((10, 40, 3), dtype=np.uint8)
    wide[:, 18:22] = 200  # columns 18..22 of 40: the crop keeps 15..25, stripe mid-crop
    fitted = fit_image(Image.fromarray(wide))
    assert fitted[:, 0].max() < 10
    assert fitted[:, 16].min() > 150
    assert fitted[:, 31].max() < 10


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (np.full((8, 8), 2.5, dtype=np.float32), r"floating-point image with values in \[2\.5"),
        (np.full((8, 8), np.nan, dtype=np.float32), r"floating-point image .* not finite"),
        (np.full((8, 8), 70000, dtype=np.int32), r"32-bit .* \[70000, 70000\], outside 0\.\.65535"),
    ],
)
def test_deep_images_without_one_meaning_are_refused_naming_the_file(
    tmp_path: Path, values: np.ndarray, message: str
) -> None:
    root = write_folder(tmp_path / "d", {"dark": 20, "light": 230})
    Image.fromarray(values).save(root / "dark" / "deep.tif")
    with pytest.raises(DomainLoadError, match=rf"dark/deep\.tif: a {message}"):
        folder_domain("d", root)


def test_an_image_past_the_decompression_bomb_limit_is_refused_naming_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = write_folder(tmp_path / "d", {"dark": 20, "light": 230})
    Image.new("L", (100, 100), 7).save(root / "light" / "big.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 100 * 100 // 2 - 1)  # error past twice
    with pytest.raises(DomainLoadError, match=r"light/big\.png: too large an image"):
        folder_domain("d2", root)


def test_folder_domain_reads_mixed_images_and_splits_per_class(tmp_path: Path) -> None:
    root = write_folder(tmp_path / "shapes", {"dark": 20, "light": 230}, per_class=6)
    spec = folder_domain("shapes", root)
    assert spec.class_names == ("dark", "light")
    assert spec.role == USER
    train, test = spec.load("train", seed=0), spec.load("test", seed=0)
    assert len(train) + len(test) == 12
    assert np.bincount(test.labels).tolist() == [1, 1]  # round(0.2 * 6) held out per class
    assert train.images.shape == (10, IMAGE_SIZE, IMAGE_SIZE, 3)
    for data in (train, test):
        for image, label in zip(data.images, data.labels, strict=True):
            value = (20, 230)[int(label)]
            assert np.abs(image[:, 20:].astype(int) - value).max() <= 2  # jpeg: close
    assert set(train.sources) | set(test.sources) == {
        f"{c}/{k}{('.png', '.jpg', '.png')[k % 3]}" for c in ("dark", "light") for k in range(6)
    }
    reseeded = spec.load("test", seed=1)
    assert len(reseeded) == 2
    assert spec.load("test", seed=0).sources.tolist() == test.sources.tolist()


@pytest.mark.parametrize(
    ("damage", "message"),
    [
        (
            lambda r: (r / "dark" / "1.jpg").write_bytes(b"not a jpeg"),
            r"dark/1\.jpg: not a readable",
        ),
        (lambda r: (r / "dark" / "notes.txt").write_text("x"), r"dark/notes\.txt: not an image"),
        (lambda r: (r / "stray.png").write_bytes(b""), r"stray\.png: a domain folder holds only"),
        (lambda r: (r / "empty").mkdir(), r"empty: empty class folder"),
        (
            lambda r: [f.unlink() for f in sorted((r / "light").iterdir())[1:]],
            r"at least two images .* light \(1\)",
        ),
    ],
)
def test_bad_folders_are_refused_naming_the_file(
    tmp_path: Path, damage: object, message: str
) -> None:
    root = write_folder(tmp_path / "d", {"dark": 20, "light": 230})
    damage(root)  # type: ignore[operator]
    with pytest.raises(DomainLoadError, match=message):
        folder_domain("d", root)


def test_a_single_class_is_refused(tmp_path: Path) -> None:
    root = write_folder(tmp_path / "one", {"only": 50})
    with pytest.raises(DomainLoadError, match="at least two classes, found 1 \\(only\\)"):
        folder_domain("one", root)


def test_pixel_csv_grey_and_rgb(tmp_path: Path) -> None:
    grey = tmp_path / "grey.csv"
    header = "label," + ",".join(f"pixel{i}" for i in range(16))
    rows = [f"{c}," + ",".join([str(v)] * 16) for c, v in [("a", 0), ("b", 255)] * 2]
    grey.write_text("\n".join([header, *rows]) + "\n")
    spec = csv_domain("grey", grey)
    assert spec.class_names == ("a", "b")
    data = spec.load("train")
    assert len(data) == 2
    assert data.images.shape[1:] == (IMAGE_SIZE, IMAGE_SIZE, 3)
    for image, label in zip(data.images, data.labels, strict=True):
        assert (image == (0, 255)[int(label)]).all()
    rgb = tmp_path / "rgb.csv"
    header = "label," + ",".join(f"pixel{i}" for i in range(12))
    rows = [f"{c}," + ",".join(["200", "10", "30"] * 4) for c in ("x", "y", "x", "y")]
    rgb.write_text("\n".join([header, *rows]))
    image = csv_domain("rgb", rgb).load("test").images[0]
    assert image[5, 5].tolist() == [200, 10, 30]


def test_spreadsheet_and_fashion_mnist_csvs_are_read(tmp_path: Path) -> None:
    """A byte-order mark (Excel's "CSV UTF-8") and CRLF lines; pixel columns counted from 1
    (the Fashion-MNIST CSVs' ``label,pixel1,...,pixel784``)."""
    header = "label," + ",".join(f"pixel{i}" for i in range(1, 17))
    rows = [f"{c}," + ",".join([str(v)] * 16) for c, v in [("a", 0), ("b", 255)] * 2]
    table = tmp_path / "excel.csv"
    table.write_bytes(("\r\n".join([header, *rows]) + "\r\n").encode("utf-8-sig"))
    spec = csv_domain("excel", table)
    assert spec.class_names == ("a", "b")
    data = spec.load("train")
    for image, label in zip(data.images, data.labels, strict=True):
        assert (image == (0, 255)[int(label)]).all()
    write_folder(tmp_path / "img", {"dark": 20, "light": 230}, per_class=2)
    listed = tmp_path / "listed.csv"
    files = sorted((tmp_path / "img").rglob("*.*"))
    lines = ["path,label"] + [f"img/{f.parent.name}/{f.name},{f.parent.name}" for f in files]
    listed.write_bytes("\r\n".join(lines).encode("utf-8-sig"))
    assert csv_domain("listed-bom", listed).class_names == ("dark", "light")


def test_path_csv_reads_relative_files(tmp_path: Path) -> None:
    write_folder(tmp_path / "img", {"dark": 20, "light": 230}, per_class=2)
    files = sorted((tmp_path / "img").rglob("*.*"))
    table = tmp_path / "list.csv"
    lines = ["path,label"] + [f"img/{f.parent.name}/{f.name},{f.parent.name} tone" for f in files]
    table.write_text("\n".join(lines))
    spec = csv_domain("listed", table)
    assert spec.class_names == ("dark tone", "light tone")
    assert len(spec.load("train")) + len(spec.load("test")) == 4


FIVE_PIXELS = ",".join(f"pixel{i}" for i in range(5))  # neither S*S nor 3*S*S


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("path,label\nmissing.png,a\n", r"bad\.csv, line 2: .*missing\.png: no such image file"),
        ("path,label\nok.png,a\nok.png\n", r"bad\.csv, line 3: 1 columns, the header has 2"),
        ("path,label\nok.png,\n", r"bad\.csv, line 2: empty label"),
        ("label,pixel0,pixel1,pixel2,pixel3\na,1,2,3,x\n", r"line 2: pixel value 'x'"),
        ("label,pixel0,pixel1,pixel2,pixel3\na,1,2,3,\u00b2\n", r"line 2: pixel value '\u00b2'"),
        ("label,pixel0,pixel1,pixel2,pixel3\na,1,2,3,2.0\n", r"line 2: pixel value '2\.0'"),
        ("label,pixel0,pixel1,pixel2,pixel3\na,1,2,3,256\n", r"line 2: pixel values must lie"),
        (
            "label," + ",".join(f"pixel{i}" for i in range(5)) + "\na,1,2,3,4,5\n",
            r"line 1: the header",
        ),
        ("file,class\nok.png,a\n", r"bad\.csv, line 1: the header must be"),
        ("", r"bad\.csv: empty CSV file"),
        ("path,label\nnot-image.png,a\n", r"line 2: .*not-image\.png: not a readable image"),
    ],
)
def test_bad_csv_rows_are_refused_naming_file_and_line(
    tmp_path: Path, text: str, message: str
) -> None:
    Image.new("RGB", (5, 5)).save(tmp_path / "ok.png")
    (tmp_path / "not-image.png").write_bytes(b"\x89PNG broken")
    (tmp_path / "bad.csv").write_text(text)
    with pytest.raises(DomainLoadError, match=message):
        csv_domain("bad", tmp_path / "bad.csv")


def test_registry_is_read_only_and_registers_through_its_api(
    tmp_path: Path, registered: list[str]
) -> None:
    with pytest.raises(TypeError):
        DOMAINS["x"] = DOMAINS["fashion"]  # type: ignore[index]
    root = write_folder(tmp_path / "tones", {"dark": 20, "light": 230})
    spec = resolve_domain(f"mine={root}")
    registered.append("mine")
    assert DOMAINS["mine"] is spec
    assert spec.source == f"folder:{root.resolve()}"
    assert resolve_domain("mine") is spec
    assert resolve_domain(f"mine={root}") is spec  # the same folder again: the same domain
    other = write_folder(tmp_path / "other", {"a": 1, "b": 2})
    with pytest.raises(ValueError, match="'mine' is already registered"):
        resolve_domain(f"mine={other}")
    assert resolve_domain(str(other)).name == "other"  # a bare path: the folder's name
    registered.append("other")

    def loader(split: str, *, seed: int = 0) -> DomainData:
        return spec.load(split, seed=seed)  # type: ignore[arg-type]

    made = register_domain("callable", loader)
    registered.append("callable")
    assert made.class_names == ("dark", "light")
    assert made.role == USER
    assert load_domain("callable", "test").images.shape[1:] == (IMAGE_SIZE, IMAGE_SIZE, 3)
    with pytest.raises(ValueError, match="built in"):
        unregister_domain("fashion")
    with pytest.raises(ValueError, match="Argument 'name' must be a registered domain"):
        resolve_domain("no_such_domain")
    with pytest.raises(ValueError, match="does not exist"):
        resolve_domain(f"x={tmp_path / 'nowhere'}")
    with pytest.raises(ValueError, match="at least two classes"):
        DomainSpec("bad", ("a",), "{}", loader)


def test_builtin_roles_hold_out_a_pretrained_and_an_unseen_domain() -> None:
    tuning, held_out = set(domains_with_role(TUNING)), set(domains_with_role(HELD_OUT))
    assert len(tuning | held_out) >= len(PRETRAINING_DOMAINS) + 3
    assert not tuning & held_out
    assert held_out & set(PRETRAINING_DOMAINS)  # the backbone saw one held-out domain ...
    assert held_out - set(PRETRAINING_DOMAINS)  # ... and not another
    for name in tuning | held_out:
        assert DOMAINS[name].pretrained == (name in PRETRAINING_DOMAINS)


def test_setting_texts_mix_builtin_and_user_domains(tmp_path: Path, registered: list[str]) -> None:
    assert resolve_setting("two-domain") is SETTINGS["two-domain"]
    root = write_folder(tmp_path / "tones", {"dark": 20, "light": 230}, per_class=30)
    spec = resolve_setting(f"tones={root}@2+printed_digits")
    registered.append("tones")
    assert spec.domains == ("tones", "printed_digits")
    assert spec.shares == (2, 1)
    built = setting_partition(
        f"tones={root}@2+printed_digits", 6, seed=0, images_per_participant=10, min_size=5
    )
    assert built.group_sizes == (4, 2)
    assert built.true_domain == (0, 0, 0, 0, 1, 1)
    assert built.prompt_templates == ("a photo of a {}.", "a photo of the digit {}.")
    with pytest.raises(ValueError, match="given twice"):
        resolve_setting("printed_digits+printed_digits")
    with pytest.raises(ValueError, match="share 'x' is not a positive integer"):
        resolve_setting("printed_digits@x+fashion")
    with pytest.raises(ValueError, match=r"Argument 'name' must be one of \['single'"):
        resolve_setting("four-domain")
