"""``python -m bench.clustering.split_rate --quick`` runs end to end and records what the README
cites."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.clustering.probe_split import rate
from bench.clustering.split_rate import main
from secfpp.crypto.clustering import ClusteringConfig


@pytest.mark.slow  # a quick benchmark run, about 14 s: not in the inner loop
def test_quick_split_rate_run_writes_its_summary(tmp_path: Path) -> None:
    out = tmp_path / "split.json"
    assert main(["--quick", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    summary = data["summary"]
    assert summary["seeds"] == 1
    assert summary["participants"] == 6
    assert 0 <= summary["parted"] <= 1
    assert 0 <= summary["false_splits"] <= 1
    assert summary["single_seeds"] == 1
    assert summary["changes_after_parted"] >= 0
    settings = [run["setting"] for run in data["runs"]]
    assert settings == ["two-domain", "single"]
    for run in data["runs"]:
        assert run["stages"] == ["published"]
        assert len(run["purity"]) == 1
        assert 0.5 <= run["purity"][0] <= 1.0
        assert set(run["split_ratios"][0]) == {"0"}  # six members: the cluster was probed
        assert run["membership_changes"] == []  # one round: nothing to compare with


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
@pytest.mark.parametrize(
    ("sizes", "gap", "want"), [((8,), 0.0, (0.0, 0.0)), ((4, 4), 2.5, (1.0, 1.0))]
)
def test_clustering_bench_rate(
    sizes: tuple[int, ...], gap: float, want: tuple[float, float]
) -> None:
    """Six rounds, beacon-drawn probes (crypto.refset_rules) and the calibrated split rule
    (false-split rate 0.01): 5 of 5 seeds part the 4 + 4 layout by then (4 of 5 with the
    fixed W2/W1 thresholds it replaced), and the single group of 8 never splits."""
    assert rate(sizes, gap, runs=5, config=ClusteringConfig(), rounds=6) == want
