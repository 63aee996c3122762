"""The image-feature cache: one encoder pass per dataset, invalidation, atomic files."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from secfpp.participant.learning.backbone import Backbone
from secfpp.participant.learning.data import read_image_folder
from secfpp.participant.learning.features import (
    FeatureCache,
    compute_features,
    preprocess_fingerprint,
)
from tests.support.learning import write_toy_images


@pytest.fixture
def encoder_calls(tiny_backbone: Backbone) -> Iterator[list[int]]:
    """Counts forward calls of the image encoder (number of images per call)."""
    calls: list[int] = []
    handle = tiny_backbone.model.visual.register_forward_hook(  # type: ignore[union-attr]
        lambda _module, inputs, _output: calls.append(int(inputs[0].shape[0]))
    )
    yield calls
    handle.remove()


def test_features_are_computed_once(
    toy_folder: Path, tiny_backbone: Backbone, tmp_path: Path, encoder_calls: list[int]
) -> None:
    dataset = read_image_folder(toy_folder, transform=tiny_backbone.preprocess)
    cache = FeatureCache(tmp_path / "cache", batch_size=8)
    first = cache.get(tiny_backbone, dataset)
    assert encoder_calls == [8, 8, 2]
    assert first.features.shape == (18, 32)
    assert first.labels.tolist() == dataset.labels.tolist()
    torch.testing.assert_close(first.features.norm(dim=-1), torch.ones(18))

    cache.get(tiny_backbone, dataset)  # second epoch, same process
    fresh = FeatureCache(tmp_path / "cache").get(tiny_backbone, dataset)  # restarted daemon
    assert encoder_calls == [8, 8, 2]
    torch.testing.assert_close(fresh.features, first.features)
    assert fresh.key == first.key
    assert [p.name for p in (tmp_path / "cache").iterdir()] == [
        cache.path_for(tiny_backbone, dataset).name
    ]


def test_changed_dataset_invalidates(
    toy_folder: Path, tiny_backbone: Backbone, tmp_path: Path, encoder_calls: list[int]
) -> None:
    cache_dir = tmp_path / "cache"
    dataset = read_image_folder(toy_folder, transform=tiny_backbone.preprocess)
    first = FeatureCache(cache_dir, batch_size=64).get(tiny_backbone, dataset)
    assert len(encoder_calls) == 1

    # A rewritten image (new bytes, new mtime): same files, stale features.
    image = toy_folder / "red" / "0.png"
    write_toy_images(tmp_path / "other", per_class=1, seed=9)
    image.write_bytes((tmp_path / "other" / "blue" / "0.png").read_bytes())
    os.utime(image, ns=(1, 1))
    changed = FeatureCache(cache_dir).get(tiny_backbone, dataset)
    assert len(encoder_calls) == 2
    assert changed.key != first.key
    index = next(i for i, s in enumerate(dataset.samples) if s.path == image)
    assert not torch.allclose(changed.features[index], first.features[index])

    # An added image.
    (toy_folder / "green" / "extra.png").write_bytes(image.read_bytes())
    grown = read_image_folder(toy_folder, transform=tiny_backbone.preprocess)
    assert len(FeatureCache(cache_dir).get(tiny_backbone, grown)) == 19
    assert len(encoder_calls) == 3
    assert len(list(cache_dir.iterdir())) == 1  # the stale entry was replaced, not kept


def test_other_backbone_weights_invalidate(
    toy_folder: Path, tiny_backbone: Backbone, tiny_model_name: str, tmp_path: Path
) -> None:
    from secfpp.participant.learning.backbone import load_backbone

    other = load_backbone(
        tiny_model_name, None, device="cpu", init_seed=1, allow_random_weights=True
    )
    dataset = read_image_folder(toy_folder, transform=tiny_backbone.preprocess)
    cache = FeatureCache(tmp_path)
    assert cache.get(tiny_backbone, dataset).key != cache.get(other, dataset).key


def test_damaged_entry_is_recomputed(
    toy_folder: Path, tiny_backbone: Backbone, tmp_path: Path, encoder_calls: list[int]
) -> None:
    dataset = read_image_folder(toy_folder, transform=tiny_backbone.preprocess)
    cache = FeatureCache(tmp_path)
    cache.get(tiny_backbone, dataset)
    cache.path_for(tiny_backbone, dataset).write_bytes(b"truncated")
    again = FeatureCache(tmp_path).get(tiny_backbone, dataset)
    assert len(encoder_calls) == 2
    assert len(again) == 18
    assert not any(p.name.endswith(".tmp") for p in tmp_path.iterdir())


def test_compute_features_matches_direct_encoding(
    toy_folder: Path, tiny_backbone: Backbone
) -> None:
    dataset = read_image_folder(toy_folder, transform=tiny_backbone.preprocess)
    features, labels = compute_features(tiny_backbone, dataset, batch_size=5)
    direct = tiny_backbone.encode_images(torch.stack([dataset[i][0] for i in range(3)]))
    torch.testing.assert_close(features[:3], direct)
    assert labels.dtype == torch.int64


def test_preprocess_fingerprint_has_no_memory_addresses() -> None:
    def convert(x: object) -> object:
        return x

    assert " at 0x" in repr(convert)
    assert " at 0x" not in preprocess_fingerprint(convert)
