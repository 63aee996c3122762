"""The coordinator-view features and attacks of the privacy benchmark, on hand-made views."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from bench.common import RoundView
from bench.privacy.coordinator import (
    distance_features,
    majority_label,
    nearest_neighbour_attack,
    update_features,
)


def _view(round_: int, x: list[float] | None, g: list[float] | None = None) -> RoundView:
    return RoundView(
        round_,
        None if x is None else np.array(x, dtype=np.float64),
        None if g is None else np.array(g, dtype=np.float64),
        None,
    )


def test_distance_features_are_the_decoded_distances_scaled_per_round() -> None:
    # Round 1 is warm-up (no distance stage). Round 2: one cluster {a, b, c} (the clusters
    # announced after round 1); round 3: clusters {a, b} and {c} announced after round 2.
    views = {
        "a": [_view(1, [9.0, 9.0]), _view(2, [0.0, 0.0]), _view(3, [0.0, 0.0])],
        "b": [_view(1, [9.0, 9.0]), _view(2, [2.0, 0.0]), _view(3, [2.0, 0.0])],
        "c": [_view(1, [9.0, 9.0]), _view(2, [4.0, 0.0]), _view(3, [10.0, 0.0])],
    }
    clusters_after = [[["a", "b", "c"]], [["a", "b"], ["c"]], [["a", "b"], ["c"]]]
    f = distance_features(views, clusters_after, warmup_rounds=1)
    # Round 2: centre (2, 0): own distances a 4, b 0, c 4; median 4; one cluster -> other = own.
    # Round 3: centres (1, 0) and (10, 0): a own 1 other 100, b own 1 other 64, c own 0 other
    # 81; median own 1.
    assert f["a"] == pytest.approx([1.0, 1.0, 1.0, 100.0])
    assert f["b"] == pytest.approx([0.0, 0.0, 1.0, 64.0])
    assert f["c"] == pytest.approx([1.0, 1.0, 0.0, 81.0])


def test_distance_features_need_every_reduced_prompt() -> None:
    views = {"a": [_view(2, [0.0])], "b": [_view(2, None)]}
    with pytest.raises(ValueError, match="'b' sent no reduced prompt in round 2"):
        distance_features(views, [[["a", "b"]]], warmup_rounds=1)


def test_update_features_take_the_last_upload() -> None:
    views = {"a": [_view(1, None, [1.0, 2.0]), _view(2, None, [3.0, 4.0])]}
    assert update_features(views)["a"] == pytest.approx([3.0, 4.0])
    with pytest.raises(ValueError, match="uploaded no update"):
        update_features({"b": [_view(1, None)]})


def test_nearest_neighbour_and_majority_label() -> None:
    train = np.array([[1.0, 0.0], [0.0, 1.0], [-1.0, 0.0]])
    labels = np.array([0, 1, 2])
    guess = nearest_neighbour_attack(train, labels, np.array([[0.1, 2.0], [-3.0, 0.2]]))
    assert guess.tolist() == [1, 2]
    assert majority_label(torch.tensor([3, 1, 3, 1, 2]), 5) == 1  # tie: the smallest label
    assert majority_label(np.array([4, 4, 0]), 5) == 4
