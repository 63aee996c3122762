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


def test_split_p_values_come_with_the_level_they_had_to_reach() -> None:
    detail = {
        "split_ratios": {"0": 0.001, "3": 0.2},
        "split_p_values": {"0": 0.005, "3": 0.35},
        "split_levels": {"0": 0.025, "3": 0.05 / 6},
    }
    assert _split_tests({"events": [{"detail": detail}]}) == (
        "cluster 0: W2/W1 0.001 (p 0.005, level 0.025), "
        "cluster 3: W2/W1 0.200 (p 0.350, level 0.00833)"
    )


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


def test_the_report_shows_the_exported_models_and_their_predictions() -> None:
    from pathlib import Path

    from demo.report import DemoRecord, Export, render

    record = DemoRecord({0: "digits", 1: "letters"})
    record.exports[0] = Export(
        Path("runs/demo/state/participant-0/personalized.safetensors"),
        [("held-out/digits/0.png", "7", 0.91, "7"), ("held-out/digits/1.png", "2", 0.55, "3")],
    )
    text = render(record, guarantees=[], artifacts={})
    assert "Personalized models (secfpp-participant export" in text
    assert "participant 0 (digits): runs/demo/state/participant-0/personalized.safetensors" in text
    assert "predict on 2 held-out images: 1 right; 0.png: 7 (0.91), 1.png: 2 (0.55) [true: 3]" in (
        text
    )
