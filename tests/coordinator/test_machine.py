"""The stage machine is pure: transitions, successors, thresholds and decisions."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest

from secfpp.coordinator.rounds.machine import (
    TERMINAL,
    TRANSITIONS,
    Stage,
    StageProgress,
    decide,
    is_valid_transition,
    next_stage,
    stage_threshold,
)
from secfpp.crypto.params import CryptoParams

T0 = datetime(2026, 11, 22, tzinfo=UTC)
DEADLINE = T0 + timedelta(minutes=5)


def progress(expected: set[int], received: set[int], threshold: int = 3) -> StageProgress:
    return StageProgress(
        Stage.DISTANCES, frozenset(expected), frozenset(received), threshold, DEADLINE
    )


def test_the_happy_path_is_allowed() -> None:
    path = [Stage.SHARING, Stage.DISTANCES, Stage.CLUSTERING, Stage.AGGREGATION, Stage.PUBLISHED]
    for a, b in itertools.pairwise(path):
        assert is_valid_transition(a, b)


@pytest.mark.parametrize("stage", list(Stage))
def test_terminal_stages_have_no_exit_and_others_can_fail_or_abort(stage: Stage) -> None:
    exits = {b for a, b in TRANSITIONS if a is stage}
    if stage in TERMINAL:
        assert exits == set()
    else:
        assert {Stage.FAILED, Stage.ABORTED} <= exits


@pytest.mark.parametrize(
    ("current", "new"),
    [
        (Stage.DISTANCES, Stage.SHARING),
        (Stage.SHARING, Stage.CLUSTERING),
        (Stage.AGGREGATION, Stage.DISTANCES),
        (Stage.PUBLISHED, Stage.SHARING),
        (Stage.FAILED, Stage.PUBLISHED),
    ],
)
def test_backward_and_skipping_steps_are_refused(current: Stage, new: Stage) -> None:
    assert not is_valid_transition(current, new)


def test_next_stage_skips_distances_in_warmup_and_aggregation_when_nothing_is_large() -> None:
    assert next_stage(Stage.SHARING, clustering_round=True, aggregates=True) is Stage.DISTANCES
    assert next_stage(Stage.SHARING, clustering_round=False, aggregates=True) is (Stage.AGGREGATION)
    assert next_stage(Stage.SHARING, clustering_round=False, aggregates=False) is (Stage.PUBLISHED)
    assert next_stage(Stage.DISTANCES, clustering_round=True, aggregates=True) is (Stage.CLUSTERING)
    assert next_stage(Stage.CLUSTERING, clustering_round=True, aggregates=False) is (
        Stage.PUBLISHED
    )
    with pytest.raises(ValueError, match="no successor"):
        next_stage(Stage.PUBLISHED, clustering_round=True, aggregates=True)


def test_thresholds_follow_the_codes() -> None:
    params = CryptoParams.for_federation(
        8, reduced_dim=16, dropout_fraction=0.375, collusion_fraction=0.125
    )
    assert stage_threshold(Stage.DISTANCES, params, clustering_round=True) == (
        params.clustering_code.threshold(2)
    )
    assert stage_threshold(Stage.AGGREGATION, params, clustering_round=True) == (
        params.aggregation_code.threshold(1)
    )
    sharing = stage_threshold(Stage.SHARING, params, clustering_round=True)
    assert sharing == max(params.clustering_code.threshold(2), params.aggregation_code.threshold(1))
    with pytest.raises(ValueError, match="no uploads"):
        stage_threshold(Stage.CLUSTERING, params, clustering_round=True)


def test_complete_stage_closes_before_the_deadline() -> None:
    decision = decide(progress({1, 2, 3, 4}, {1, 2, 3, 4, 9}), T0)
    assert decision.action == "close"
    assert decision.dropped == frozenset()


def test_incomplete_stage_waits_until_the_deadline() -> None:
    assert decide(progress({1, 2, 3, 4}, {1, 2, 3}), T0).action == "wait"


def test_at_the_deadline_the_threshold_decides() -> None:
    closed = decide(progress({1, 2, 3, 4}, {1, 2, 3}), DEADLINE)
    assert closed.action == "close"
    assert closed.dropped == {4}
    failed = decide(progress({1, 2, 3, 4}, {1, 2}), DEADLINE)
    assert failed.action == "fail"
    assert failed.dropped == {3, 4}
    assert "2 of 4 uploads" in failed.reason
    assert "needs 3" in failed.reason


def test_a_stage_that_cannot_reach_its_threshold_fails_at_once() -> None:
    decision = decide(progress({1, 2}, set()), T0)
    assert decision.action == "fail"
    assert "only 2 participants remain" in decision.reason
