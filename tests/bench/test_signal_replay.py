"""``bench.clustering.signal_replay``: the case bookkeeping on hand-made histories, the replay on
planted
groups and on one group, and a real ``--quick`` run on the shipped backbone."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from bench.clustering.signal_replay import _case, main, replay
from secfpp.crypto.clustering import ClusteringConfig

DOMAINS = ["a", "a", "a", "b", "b", "b"]


def test_case_finds_the_first_parted_round_and_the_changes_after_it() -> None:
    one = [(0, 1, 2, 3, 4, 5)]
    parted = [(0, 1, 2), (3, 4, 5)]
    wrong = [(0, 1, 3), (2, 4, 5)]
    assert _case([one, parted, parted], DOMAINS) == {"parted_round": 2, "changes_after": 0}
    assert _case([one, wrong, parted, one], DOMAINS) == {"parted_round": 3, "changes_after": 1}
    assert _case([one, wrong], DOMAINS) == {"parted_round": None, "changes_after": 0}
    assert _case([one, one], ["a"] * 6) == {"false_split": False}
    assert _case([one, parted], ["a"] * 6) == {"false_split": True}


def test_replay_parts_planted_groups_and_keeps_one_group_whole() -> None:
    rng = np.random.default_rng(2)
    config = ClusteringConfig(false_split_rate=0.01, null_draws=99)
    centres = rng.standard_normal((2, 64)) * 2
    x = np.repeat(centres, 5, axis=0) + 0.1 * rng.standard_normal((10, 64))
    domains = ["a"] * 5 + ["b"] * 5
    # Six rounds of beacon-drawn probes (crypto.refset_rules) and the calibrated rule at 1%.
    history = replay(x, domains, config, rounds=6)
    assert _case(history, domains)["parted_round"] is not None
    assert history[-1] == [(0, 1, 2, 3, 4), (5, 6, 7, 8, 9)]
    single = rng.standard_normal((10, 64))
    assert all(len(c) == 1 for c in replay(single, ["a"] * 10, config, rounds=6))


@pytest.mark.slow  # a quick benchmark run, about 11 s: not in the inner loop
def test_quick_run_writes_its_rows(tmp_path: Path) -> None:
    out = tmp_path / "replay.json"
    assert main(["--quick", "--settings", "single", "two-domain", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["rules"] == {"false_split_rate": 0.05, "null_draws": 199, "signal": "data-balanced"}
    single, two = got["rows"]
    assert single["setting"] == "single"
    assert 0 <= single["false_splits"] <= single["seeds"] == 2
    assert two["setting"] == "two-domain"
    assert len(two["parted_rounds"]) == 2
