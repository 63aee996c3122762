"""The false-split rate is a budget a cluster spends over its tests (crypto/clustering.py,
``split_level``): known answers of the levels and draws, the curtailed test decides as the
full one, the count each cluster carries, and the rate over many rounds of one group."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secfpp.crypto.clustering import (
    MAX_NULL_DRAWS,
    ClusteringConfig,
    Membership,
    initial_probe,
    null_draws_for,
    secpc_step,
    split_level,
)
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.secpc import ReferenceSets, plaintext_distances
from secfpp.crypto.split_rule import split_p_value
from tests.support.clustering import fixed_point_steps


def test_levels_and_draws_known_answers() -> None:
    assert split_level(0.05, 1) == pytest.approx(0.025)
    assert split_level(0.05, 2) == pytest.approx(0.05 / 6)
    assert split_level(0.05, 6) == pytest.approx(0.05 / 42)
    assert math.fsum(split_level(0.05, k) for k in range(1, 10_001)) == pytest.approx(
        0.05 * (1 - 1 / 10_001)
    )
    assert [null_draws_for(split_level(0.05, k), 199) for k in (1, 2, 3, 6)] == [
        199,
        239,
        479,
        1679,
    ]
    for k in range(1, 16):  # at every level a passing p-value leaves two null ratios below
        level = split_level(0.05, k)
        assert level * (null_draws_for(level, 199) + 1) >= 2 - 1e-9
    assert null_draws_for(split_level(0.05, 15), 199) <= MAX_NULL_DRAWS
    assert null_draws_for(split_level(0.05, 16), 199) > MAX_NULL_DRAWS
    with pytest.raises(ParameterError):
        split_level(0.05, 0)


@settings(max_examples=30)
@given(
    seed=st.integers(0, 10_000),
    gap=st.sampled_from([0.0, 0.6, 1.2, 3.0]),
    level=st.sampled_from([0.2, 0.05, 0.0125, 0.004]),
)
def test_a_curtailed_test_decides_as_every_draw_would(seed: int, gap: float, level: float) -> None:
    """Stopping once the test cannot pass gives the full test's decision, and a stopped
    test reports a p-value above the level."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((10, 24))
    x[:4, 0] += gap * 6
    inside = np.isin(
        np.arange(10), initial_probe(tuple(range(10)), min_reference_size=3, salt=f"b{seed}")
    )
    d_centre = ((x - x.mean(axis=0)) ** 2).sum(axis=1)
    d_probe = ((x - x[inside].mean(axis=0)) ** 2).sum(axis=1)
    draws = null_draws_for(level, 99)
    full = split_p_value(d_centre, d_probe, inside, draws=draws, seed=f"s{seed}", min_size=3)
    cut = split_p_value(
        d_centre, d_probe, inside, draws=draws, seed=f"s{seed}", min_size=3, level=level
    )
    assert cut.cut == full.cut
    assert (cut.p_value <= level + 1e-12) == (full.p_value <= level + 1e-12)
    if full.p_value <= level + 1e-12:
        assert cut.p_value == full.p_value  # a passing test made every draw
    else:
        assert cut.p_value > level


def _two_groups() -> tuple[np.ndarray, ReferenceSets]:
    rng = np.random.default_rng(3)
    base = rng.standard_normal((4, 32)) * 4
    x = np.repeat(base, 4, axis=0) + 0.1 * rng.standard_normal((16, 32))
    first, second = tuple(range(8)), tuple(range(8, 16))
    refs = ReferenceSets(
        tuple(range(16)), ((0, first), (1, second)), ((0, (0, 1, 4)), (1, (8, 9, 12)))
    )
    return x, refs


def test_each_cluster_counts_its_tests_and_a_split_starts_both_parts_afresh() -> None:
    x, refs = _two_groups()
    config = ClusteringConfig(false_split_rate=0.05)
    before = Membership(refs.clusters, (), 2, tests=((0, 2), (1, 4)))
    result = secpc_step(plaintext_distances(x, refs), before, config)
    assert result.split_levels == {0: split_level(0.05, 3), 1: split_level(0.05, 5)}
    (split,) = result.splits
    counts = dict(result.membership.tests)
    assert split.parent not in counts  # both parts start afresh
    assert split.child not in counts
    other = 1 - split.parent
    assert counts[other] == (3 if other == 0 else 5)
    # A frozen cluster is tested (its p-value is shown) but spends nothing: it cannot split.
    frozen = secpc_step(plaintext_distances(x, refs), before, config, frozen=frozenset({0, 1}))
    assert frozen.splits == ()
    assert dict(frozen.membership.tests) == {0: 2, 1: 4}
    assert set(frozen.split_p_values) == {0, 1}
    # Nor does a round that cannot split at all (max_clusters reached): same levels next time.
    full = secpc_step(plaintext_distances(x, refs), before, ClusteringConfig(max_clusters=2))
    assert full.splits == ()
    assert dict(full.membership.tests) == {0: 2, 1: 4}


def test_a_spent_budget_is_not_tested_and_a_merge_keeps_the_larger_count() -> None:
    x, refs = _two_groups()
    config = ClusteringConfig(false_split_rate=0.05)
    spent = Membership(refs.clusters, (), 2, tests=((0, 15), (1, 15)))
    result = secpc_step(plaintext_distances(x, refs), spent, config)
    assert result.splits == ()
    assert result.split_p_values == {}
    assert dict(result.membership.tests) == {0: 15, 1: 15}
    merged = secpc_step(
        plaintext_distances(x, refs),
        Membership(refs.clusters, (), 2, tests=((0, 3), (1, 7))),
        config,
        undo=(0, 1),
    )
    assert [c for c, _ in merged.membership.clusters] == [0]
    # The larger count; this round's tests spent nothing (a round with an undo cannot split).
    assert dict(merged.membership.tests) == {0: 7}


def test_the_count_round_trips_and_is_validated() -> None:
    m = Membership(((0, (1, 2, 3)), (2, (4, 5, 6))), (), 3, tests=((0, 4),))
    assert m.to_dict()["tests"] == [[0, 4]]
    assert Membership.from_dict(m.to_dict()) == m
    assert "tests" not in Membership(m.clusters, (), 3).to_dict()
    assert m.tests_made(0) == 4
    assert m.tests_made(2) == 0
    with pytest.raises(ParameterError, match="tests"):
        Membership(m.clusters, (), 3, tests=((1, 1),))  # no cluster 1
    with pytest.raises(ParameterError, match="tests"):
        Membership(m.clusters, (), 3, tests=((0, -1),))


@pytest.mark.slow  # about 5 s: out of the inner loop (bash dev.sh quick)
def test_one_group_splits_at_most_at_the_rate_over_six_rounds() -> None:
    """One isotropic group of 8 in 64 dimensions, the same points every round (the data
    signal does not move) and a fresh probe each round, 6 rounds, 100 federations, at
    rate 0.2: at most ``0.2 (1 - 1/7)`` of them ever split, within three binomial errors
    (15 did). Testing every round at the one rate, the rule before the budget, split 70."""
    config = ClusteringConfig(false_split_rate=0.2, null_draws=99)
    n, federations, rounds = 8, 100, 6
    split = 0
    for seed in range(federations):
        x = np.random.default_rng(5000 + seed).standard_normal((n, 64))
        steps = fixed_point_steps(x, config, rounds=rounds, salt=f"f{seed}")
        split += any(result.splits for result in steps)
    bound = 0.2 * (1 - 1 / (rounds + 1))
    assert split / federations <= bound + 3 * math.sqrt(bound * (1 - bound) / federations), split
