"""``bench.clustering.separability``: the exhaustive best partition against a direct search,
planted groups, a seed whose signals mix domains, and the report from a written cache."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench.clustering.domain_signal import between_fraction
from bench.clustering.separability import best_partition, main, rows_of, same_partition


def _within(x: np.ndarray, labels: tuple[int, ...]) -> float:
    z = np.array(labels)
    return float(sum(((x[z == k] - x[z == k].mean(axis=0)) ** 2).sum() for k in set(labels)))


def _direct_best(x: np.ndarray, groups: int, min_size: int) -> float:
    """The least within-part sum of squares by computing every labeling's parts directly."""
    values = [
        _within(x, labels)
        for labels in itertools.product(range(groups), repeat=x.shape[0])
        if all(labels.count(k) >= min_size for k in range(groups))
    ]
    return min(values)


@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(6, 8),
    groups=st.sampled_from([2, 3]),
)
def test_the_best_partition_is_the_least_within_sum_of_squares(
    seed: int, n: int, groups: int
) -> None:
    min_size = 2 if groups == 3 else 3
    x = np.random.default_rng(seed).standard_normal((n, 4))
    labels = best_partition(x, groups, min_size)
    assert sorted(np.bincount(labels, minlength=groups))[0] >= min_size
    assert _within(x, tuple(labels.tolist())) == pytest.approx(_direct_best(x, groups, min_size))


def test_planted_groups_are_separable_and_a_member_among_the_others_is_not() -> None:
    rng = np.random.default_rng(4)
    centres = np.array([[0.0] * 8, [10.0] + [0.0] * 7, [0.0, 10.0] + [0.0] * 6])
    domains = ["a"] * 4 + ["b"] * 4 + ["c"] * 4
    x = np.repeat(centres, 4, axis=0) + 0.3 * rng.standard_normal((12, 8))
    assert same_partition(best_partition(x, 3, 3).tolist(), domains)
    labels = tuple(["a", "b", "c"].index(d) for d in domains)
    total = float(((x - x.mean(axis=0)) ** 2).sum())
    assert between_fraction(x, domains) == pytest.approx(1 - _within(x, labels) / total)
    assert between_fraction(x, domains) > 0.98
    moved = x.copy()
    moved[0] = centres[1] + 0.1  # a member of "a" whose signal sits inside "b"
    assert not same_partition(best_partition(moved, 3, 3).tolist(), domains)


def test_same_partition_ignores_names_but_not_parts() -> None:
    assert same_partition([0, 0, 1, 1], ["x", "x", "y", "y"])
    assert same_partition([1, 1, 0, 0], ["x", "x", "y", "y"])
    assert not same_partition([0, 1, 1, 1], ["x", "x", "y", "y"])
    assert not same_partition([0, 0, 0, 0], ["x", "x", "y", "y"])


def test_too_large_or_too_small_a_federation_is_refused() -> None:
    with pytest.raises(ValueError, match="not searchable"):
        best_partition(np.zeros((15, 2)), 2, 3)
    with pytest.raises(ValueError, match="not searchable"):
        best_partition(np.zeros((5, 2)), 2, 3)


def test_the_report_reads_a_signal_cache_and_sets_the_replay_beside_it(tmp_path: Path) -> None:
    rng = np.random.default_rng(5)
    cache: dict[str, np.ndarray] = {}
    for seed in range(3):
        x = np.repeat(np.eye(2, 6) * 5, 4, axis=0) + 0.2 * rng.standard_normal((8, 6))
        if seed == 2:
            x[0] = x[7]  # one seed in which a member of "a" looks like "b"
        key = f"data-balanced|a+b|0.5|8|{seed}|300"
        cache[key] = x
        cache[f"{key}|domains"] = np.array(["a"] * 4 + ["b"] * 4)
        single = f"data-balanced|a|0.5|8|{seed}|300"  # one domain: not a row
        cache[single] = rng.standard_normal((8, 6))
        cache[f"{single}|domains"] = np.array(["a"] * 8)
    np.savez(tmp_path / "signals.npz", **cache)  # type: ignore[arg-type]
    with np.load(tmp_path / "signals.npz") as stored:
        (row,) = rows_of(stored)
    assert row["setting"] == "a+b"
    assert row["seeds"] == [0, 1, 2]
    assert row["separable"] == [True, True, False]
    heldout = {
        "meta": {"command": "python -m bench.clustering.heldout --quick"},
        "rows": [
            {"kind": "pair", "setting": "a+b", "alpha": 0.5, "participants": 8,
             "judged": {"measured": "2 of 3"}},
        ],
    }  # fmt: skip
    (tmp_path / "heldout.json").write_text(json.dumps(heldout))
    argv = ["--signals", str(tmp_path / "signals.npz"), "--heldout", str(tmp_path / "heldout.json")]
    argv += ["--json", str(tmp_path / "out.json"), "--md", str(tmp_path / "out.md")]
    assert main(argv) == 0
    text = (tmp_path / "out.md").read_text()
    assert "| a \\| b | 8 | 0.5 | 2 of 3 |" in text
    assert text.rstrip().endswith("| 2 of 3 |")
    assert json.loads((tmp_path / "out.json").read_text())["rows"][0]["parted"] == "2 of 3"


def test_a_missing_cache_is_refused_by_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        main(["--signals", str(tmp_path / "nope.npz")])
    assert "nope.npz: no such file" in capsys.readouterr().err
