"""``bench.clustering.domain_signal``: the between-part fraction against hand-computed values, the
exhaustive best partition on planted groups, and a real ``--quick`` run."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.clustering.domain_signal import best_partition, between_fraction, main


def test_between_fraction_known_answer() -> None:
    # two points per side on a line: mean 0, total 1+1+9+9 = 20, between 2*2^2*2 = 16
    x = np.array([[-1.0], [-3.0], [1.0], [3.0]])
    assert between_fraction(x, ["a", "a", "b", "b"]) == pytest.approx(16 / 20)
    # one label: nothing between; equal rows: defined as 0
    assert between_fraction(x, ["a"] * 4) == pytest.approx(0.0)
    assert between_fraction(np.ones((3, 2)), [0, 1, 1]) == 0.0


def test_best_partition_finds_planted_groups_and_respects_min_part() -> None:
    rng = np.random.default_rng(7)
    x = rng.normal(size=(8, 16)) * 0.1
    x[[1, 4, 6]] += 3.0
    value, part = best_partition(x, 3)
    assert set(part) == {1, 4, 6}
    assert value == pytest.approx(between_fraction(x, [i in {1, 4, 6} for i in range(8)]))
    assert 0.9 < value <= 1.0
    # with parts of at least 4 the planted group of 3 cannot be a part on its own, but it
    # stays together on one side
    _, part4 = best_partition(x, 4)
    assert len(part4) == 4
    assert {1, 4, 6} <= set(part4) or not {1, 4, 6} & set(part4)
    with pytest.raises(ValueError, match="n <= 12"):
        best_partition(np.zeros((13, 2)), 3)
    with pytest.raises(ValueError, match="cannot make two parts"):
        best_partition(np.zeros((5, 2)), 3)


@pytest.mark.slow  # over 7 s in the inner loop (bash dev.sh quick)
def test_quick_run_writes_summary(tmp_path: Path) -> None:
    out = tmp_path / "signal.json"
    assert main(["--quick", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["summary"]["cases"] == 1
    row = result["rows"][0]
    assert 0.0 <= row["beta_domains"] <= row["beta_best"] <= 1.0
    assert len(row["best_part"]) >= 3
