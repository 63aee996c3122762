"""Reading a participant's images: layouts, split, and errors that name the file."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.data import (
    load_dataset,
    read_class_list,
    read_csv_dataset,
    read_image_folder,
    split_dataset,
)
from secfpp.participant.learning.errors import DatasetError, LearningConfigError
from tests.support.learning import COLOURS, write_toy_images


def test_image_folder(toy_folder: Path, tiny_backbone: Backbone) -> None:
    dataset = read_image_folder(toy_folder, transform=tiny_backbone.preprocess)
    assert dataset.classnames == tuple(sorted(COLOURS))
    assert len(dataset) == 18
    image, label = dataset[0]
    assert image.shape == (3, 32, 32)
    assert image.dtype == torch.float32
    assert label == 0
    assert dataset.labels.tolist() == [0] * 6 + [1] * 6 + [2] * 6


def test_class_list_fixes_the_label_order(toy_folder: Path, tiny_backbone: Backbone) -> None:
    order = ["red", "green", "blue"]
    dataset = read_image_folder(toy_folder, transform=tiny_backbone.preprocess, classnames=order)
    assert dataset.classnames == tuple(order)
    assert dataset.samples[0].path.parent.name == "red"


def test_csv_dataset(toy_folder: Path, tiny_backbone: Backbone, tmp_path: Path) -> None:
    rows = ["path,label", "images/red/0.png,red", "images/blue/1.png,blue", ""]
    (tmp_path / "data.csv").write_text("\n".join(rows))
    (tmp_path / "classes.txt").write_text("# colours\nred\ngreen\nblue\n")
    classes = read_class_list(tmp_path / "classes.txt")
    assert classes == ["red", "green", "blue"]
    dataset = load_dataset(
        tmp_path / "data.csv", transform=tiny_backbone.preprocess, classnames=classes
    )
    assert len(dataset) == 2
    assert dataset.labels.tolist() == [0, 2]
    assert dataset[1][0].shape == (3, 32, 32)


def test_csv_label_missing_from_class_list(toy_folder: Path, tmp_path: Path) -> None:
    (tmp_path / "data.csv").write_text("images/red/0.png,red\nimages/red/1.png,purple\n")
    with pytest.raises(DatasetError, match=r"data.csv:2: label 'purple' is not in the class list"):
        read_csv_dataset(tmp_path / "data.csv", transform=lambda x: x, classnames=["red"])


def test_csv_missing_image_and_bad_row(toy_folder: Path, tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("images/red/99.png,red\n")
    with pytest.raises(DatasetError, match=r"a.csv:1: image .*99.png does not exist"):
        read_csv_dataset(tmp_path / "a.csv", transform=lambda x: x, classnames=["red"])
    (tmp_path / "b.csv").write_text("images/red/0.png,red,extra\n")
    with pytest.raises(DatasetError, match=r"b.csv:1: expected 2 fields"):
        read_csv_dataset(tmp_path / "b.csv", transform=lambda x: x, classnames=["red"])
    with pytest.raises(LearningConfigError, match="'classnames' is required"):
        load_dataset(tmp_path / "a.csv", transform=lambda x: x)


def test_empty_class_directory(toy_folder: Path) -> None:
    (toy_folder / "yellow").mkdir()
    (toy_folder / "yellow" / "notes.txt").write_text("no images here")
    with pytest.raises(DatasetError, match=r"class directory .*yellow is empty") as info:
        read_image_folder(toy_folder, transform=lambda x: x)
    assert info.value.path is not None
    assert info.value.path.endswith("yellow")


def test_directory_missing_from_class_list(toy_folder: Path) -> None:
    with pytest.raises(DatasetError, match=r"class directory .*red is missing from the class list"):
        read_image_folder(toy_folder, transform=lambda x: x, classnames=["blue", "green"])
    with pytest.raises(DatasetError, match="class 'violet' has no directory"):
        read_image_folder(
            toy_folder, transform=lambda x: x, classnames=["blue", "green", "red", "violet"]
        )


def test_unreadable_image_is_named(toy_folder: Path, tiny_backbone: Backbone) -> None:
    broken = toy_folder / "green" / "9.png"
    broken.write_bytes(b"\x89PNG but not really")
    dataset = read_image_folder(toy_folder, transform=tiny_backbone.preprocess)
    index = next(i for i, s in enumerate(dataset.samples) if s.path == broken)
    with pytest.raises(DatasetError, match=re.escape(f"image {broken} cannot be read")) as info:
        dataset[index]
    assert info.value.path == str(broken)


def test_missing_root(tmp_path: Path) -> None:
    with pytest.raises(DatasetError, match="does not exist"):
        read_image_folder(tmp_path / "absent", transform=lambda x: x)


def test_split_is_stratified_and_deterministic_per_participant(tmp_path: Path) -> None:
    root = write_toy_images(tmp_path / "images", per_class=10)
    dataset = read_image_folder(root, transform=lambda x: x)
    train, test = split_dataset(dataset, test_fraction=0.3, seed=5, participant_id=1)
    assert (train.split, test.split) == ("train", "test")
    assert len(train) == 21
    assert len(test) == 9
    assert sorted(test.labels.tolist()) == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert not {s.path for s in train.samples} & {s.path for s in test.samples}
    again = split_dataset(dataset, test_fraction=0.3, seed=5, participant_id=1)[1]
    other = split_dataset(dataset, test_fraction=0.3, seed=5, participant_id=2)[1]
    assert again.samples == test.samples
    assert other.samples != test.samples


def test_split_keeps_a_training_sample_per_class(tmp_path: Path) -> None:
    root = write_toy_images(tmp_path / "images", per_class=1)
    train, test = split_dataset(
        read_image_folder(root, transform=lambda x: x), test_fraction=0.9, participant_id="p"
    )
    assert len(train) == 3
    assert len(test) == 0
    with pytest.raises(LearningConfigError, match="'test_fraction' must be in"):
        split_dataset(train, test_fraction=1.0, participant_id=0)
