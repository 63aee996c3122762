"""Dirichlet partitions: deterministic, complete, disjoint, skewed as alpha says."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from demo.partition import (
    Domain,
    dirichlet_split,
    multi_domain_partition,
    single_domain_partition,
    write_image_folders,
)


def _domain(name: str, n: int = 600, classes: int = 10, seed: int = 0) -> Domain:
    rng = np.random.default_rng(seed)
    labels = np.arange(n, dtype=np.int64) % classes
    images = rng.integers(0, 255, (n, 8, 8), dtype=np.uint8)
    return Domain(name, images, labels, [f"c{i}" for i in range(classes)])


def test_split_is_a_partition_and_deterministic() -> None:
    labels = _domain("d").labels
    a = dirichlet_split(labels, 5, alpha=0.5, seed=3)
    b = dirichlet_split(labels, 5, alpha=0.5, seed=3)
    assert all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))
    joined = np.sort(np.concatenate(a))
    assert np.array_equal(joined, np.arange(len(labels)))
    assert min(len(p) for p in a) >= 10
    c = dirichlet_split(labels, 5, alpha=0.5, seed=4)
    assert not all(np.array_equal(x, y) for x, y in zip(a, c, strict=True))


def test_small_alpha_skews_labels_more() -> None:
    labels = _domain("d", n=2000).labels

    def skew(alpha: float) -> float:
        parts = dirichlet_split(labels, 5, alpha=alpha, seed=1)
        # mean over parts of the largest class fraction
        return float(np.mean([np.bincount(labels[p], minlength=10).max() / len(p) for p in parts]))

    assert skew(0.1) > skew(100.0) + 0.2
    assert skew(100.0) < 0.2


def test_multi_domain_gives_each_domain_to_half() -> None:
    parts = multi_domain_partition([_domain("hand"), _domain("print", seed=1)], 8, seed=2)
    assert [p.domain.name for p in parts] == ["hand"] * 4 + ["print"] * 4
    assert [p.participant for p in parts] == list(range(8))
    with pytest.raises(ValueError, match="equally"):
        multi_domain_partition([_domain("a"), _domain("b")], 7)


def test_bad_arguments_are_refused() -> None:
    labels = _domain("d", n=30).labels
    with pytest.raises(ValueError, match="'alpha'"):
        dirichlet_split(labels, 2, alpha=0, seed=0)
    with pytest.raises(ValueError, match="cannot give"):
        dirichlet_split(labels, 4, alpha=1, seed=0)


def test_write_image_folders(tmp_path: Path) -> None:
    parts = single_domain_partition(_domain("d", n=60, classes=3), 2, seed=0, min_size=5)
    folders = write_image_folders(parts, tmp_path)
    assert [f.name for f in folders] == ["participant-0", "participant-1"]
    total = sum(1 for _ in tmp_path.rglob("*.png"))
    assert total == 60
    manifest = json.loads((tmp_path / "manifest.json").read_text())
    assert sum(sum(m["classes"].values()) for m in manifest) == 60
