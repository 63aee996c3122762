"""secpc_step rules on hand-made distance tables (DESIGN.md section 4, step 4)."""

from __future__ import annotations

import numpy as np
import pytest

from crypto.clustering import ClusteringConfig, Membership, inherit_prompts, secpc_step
from crypto.errors import ParameterError
from crypto.secpc import Distances, ReferenceSets

CONFIG = ClusteringConfig(min_aggregation_size=2, max_clusters=4)


def table(
    refs: ReferenceSets, point: list[list[float]], centre: list[list[float]] | None = None
) -> Distances:
    n_c = len(refs.clusters)
    return Distances(refs, np.array(point, dtype=float), np.array(centre or np.zeros((n_c, n_c))))


def test_assignment_nearest_centre_ties_to_lowest_id() -> None:
    refs = ReferenceSets((0, 1, 2, 3), ((0, (0, 1)), (1, (2, 3))))
    d = table(refs, [[1, 2], [3, 3], [5, 1], [2, 1]], [[0, 100], [100, 0]])
    result = secpc_step(d, Membership(refs.clusters, (), 2), CONFIG)
    assert result.assignment == {0: 0, 1: 0, 2: 1, 3: 1}
    assert result.membership.clusters == ((0, (0, 1)), (1, (2, 3)))


def test_split_when_candidate_explains_enough_of_the_spread() -> None:
    refs = ReferenceSets(tuple(range(6)), ((0, tuple(range(6))),), ((0, 5),))
    # Columns: centre of cluster 0, candidate {5}. Members 3, 4 are nearer to 5.
    point = [[1, 9], [1, 9], [1, 9], [4, 0.5], [4, 0.5], [5, 0]]
    result = secpc_step(table(refs, point), Membership(refs.clusters, refs.candidates, 1), CONFIG)
    assert [(s.parent, s.child, s.members) for s in result.splits] == [(0, 1, (5, 3, 4))]
    assert result.split_ratios[0] == pytest.approx((1 + 1 + 1 + 0.5 + 0.5) / (1 + 1 + 1 + 4 + 4))
    assert result.membership.clusters == ((0, (0, 1, 2)), (1, (3, 4, 5)))
    assert result.membership.next_id == 2
    # New clusters get a candidate one round later; the parent gets its farthest member.
    assert dict(result.membership.candidates) == {0: 0}


def test_no_split_above_ratio_or_below_min_size() -> None:
    refs = ReferenceSets(tuple(range(6)), ((0, tuple(range(6))),), ((0, 5),))
    compact = [[1, 3], [1, 3], [1, 3], [1, 3], [1, 3], [2, 0]]
    result = secpc_step(table(refs, compact), Membership(refs.clusters, refs.candidates, 1), CONFIG)
    assert result.splits == ()
    lonely = [[1, 9], [1, 9], [1, 9], [1, 9], [4, 9], [30, 0]]
    strict = ClusteringConfig(min_aggregation_size=2, split_ratio=0.9)
    result = secpc_step(table(refs, lonely), Membership(refs.clusters, refs.candidates, 1), strict)
    assert result.splits == ()  # the candidate alone is below min_aggregation_size


def test_split_respects_max_clusters() -> None:
    refs = ReferenceSets(tuple(range(6)), ((0, tuple(range(6))),), ((0, 5),))
    point = [[1, 9], [1, 9], [1, 9], [4, 0.5], [4, 0.5], [5, 0]]
    one = ClusteringConfig(min_aggregation_size=2, max_clusters=1)
    result = secpc_step(table(refs, point), Membership(refs.clusters, refs.candidates, 1), one)
    assert result.splits == ()


def test_merge_closest_pair_below_spread() -> None:
    refs = ReferenceSets(tuple(range(6)), ((0, (0, 1)), (1, (2, 3)), (2, (4, 5))))
    point = [[1, 5, 50], [1, 5, 50], [5, 1, 50], [5, 1, 50], [50, 50, 1], [50, 50, 1]]
    centre = [[0, 0.5, 40], [0.5, 0, 40], [40, 40, 0]]
    result = secpc_step(table(refs, point, centre), Membership(refs.clusters, (), 3), CONFIG)
    assert [(m.kept, m.removed) for m in result.merges] == [(0, 1)]
    assert result.membership.clusters == ((0, (0, 1, 2, 3)), (2, (4, 5)))


def test_absent_participants_keep_their_cluster() -> None:
    membership = Membership(((0, (0, 1, 2)), (1, (3, 4, 5))), (), 2)
    refs = membership.reference_sets([0, 1, 3, 4], min_aggregation_size=2)
    assert refs.clusters == ((0, (0, 1)), (1, (3, 4)))
    d = table(refs, [[1, 9], [1, 9], [9, 1], [9, 1]], [[0, 50], [50, 0]])
    result = secpc_step(d, membership, CONFIG)
    assert result.membership.clusters == membership.clusters


def test_reference_sets_drop_candidates_of_small_clusters() -> None:
    membership = Membership(((0, (0, 1, 2, 3)), (1, (4, 5, 6))), ((0, 3), (1, 6)), 2)
    refs = membership.reference_sets(range(7), min_aggregation_size=2)
    assert refs.candidates == ((0, 3),)
    assert membership.aggregation_sets([0, 1, 4], min_aggregation_size=2) == [(0, (0, 1))]


def test_membership_validation_and_round_trip() -> None:
    membership = Membership(((0, (0, 1)), (3, (2, 5))), ((3, 5),), 4)
    assert Membership.from_dict(membership.to_dict()) == membership
    assert membership.cluster_of(5) == 3
    with pytest.raises(ParameterError, match="overlaps"):
        Membership(((0, (0, 1)), (1, (1, 2))), (), 2)
    with pytest.raises(ParameterError, match="'next_id'"):
        Membership(((0, (0, 1)), (1, (2,))), (), 1)


def test_inherit_prompts() -> None:
    refs = ReferenceSets(tuple(range(6)), ((0, tuple(range(6))),), ((0, 5),))
    point = [[1, 9], [1, 9], [1, 9], [4, 0.5], [4, 0.5], [5, 0]]
    before = Membership(refs.clusters, refs.candidates, 1)
    result = secpc_step(table(refs, point), before, CONFIG)
    prompts = inherit_prompts({0: np.ones(3)}, before, result)
    assert set(prompts) == {0, 1}
    np.testing.assert_array_equal(prompts[1], np.ones(3))
    refs2 = ReferenceSets(tuple(range(6)), ((0, (0, 1)), (1, (2, 3, 4, 5))))
    merged = secpc_step(
        table(refs2, [[1, 2]] * 2 + [[2, 1]] * 4, [[0, 0.1], [0.1, 0]]),
        Membership(refs2.clusters, (), 2),
        CONFIG,
    )
    prompts = inherit_prompts(
        {0: np.zeros(2), 1: np.full(2, 3.0)}, Membership(refs2.clusters, (), 2), merged
    )
    np.testing.assert_allclose(prompts[0], np.full(2, 2.0))  # (2*0 + 4*3) / 6
