"""The demo's progress line shows why a cluster did or did not split."""

from __future__ import annotations

from demo.run import _split_tests


def test_split_statistics_from_the_clustering_event() -> None:
    status = {
        "events": [
            {"detail": {}},
            {"detail": {"split_ratios": {"0": 1.0, "2": 0.5}, "axis_ratios": {"0": 0.214}}},
        ]
    }
    assert _split_tests(status) == "; split test c0: S1/S0 1.00, W2/W1 0.21, c2: S1/S0 0.50"


def test_no_split_test_no_text() -> None:
    assert _split_tests({"events": [{"detail": {"split_ratios": {}}}]}) == ""
    assert _split_tests({"events": []}) == ""
