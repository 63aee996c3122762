"""The demo's progress lines say what the clusters are and why a cluster did or did not split."""

from __future__ import annotations

from demo.report import describe_clusters
from demo.run import _split_tests


def test_split_statistics_from_the_clustering_event() -> None:
    status = {
        "events": [
            {"detail": {}},
            {"detail": {"split_ratios": {"0": 0.214, "2": 0.031}}},
        ]
    }
    assert _split_tests(status) == "cluster 0: W2/W1 0.214, cluster 2: W2/W1 0.031"


def test_no_split_test_no_text() -> None:
    assert _split_tests({"events": [{"detail": {"split_ratios": {}}}]}) == ""
    assert _split_tests({"events": []}) == ""


def test_clusters_in_words_with_what_changed_and_purity() -> None:
    domains = {0: "digits", 1: "digits", 2: "letters", 3: "letters"}
    before = [[0, 1, 2, 3]]
    after = [[0, 1], [2, 3]]
    assert describe_clusters(before, domains) == [
        "cluster A (4 participants): 0, 1, 2, 3; mixed: digits x 2, letters x 2",
        "purity against the true domains: 0.50",
    ]
    assert describe_clusters(after, domains, before) == [
        "cluster A (2 participants): 0, 1; all digits",
        "cluster B (2 participants): 2, 3; all letters",
        "membership changed: 1 -> 2 clusters; participants now grouped differently: 0, 1, 2, 3",
        "purity against the true domains: 1.00",
    ]
    assert describe_clusters(after, domains, after)[-2] == "membership unchanged"
