"""The calibrated split rule (crypto/split_rule.py): its false-split rate is its
parameter, it finds clearly separated groups, and its null draws are the beacon's."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from numpy.typing import NDArray

from secfpp.crypto import split_rule
from secfpp.crypto.clustering import ClusteringConfig, Membership, initial_probe, secpc_step
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.secpc import plaintext_distances
from secfpp.crypto.split_rule import (
    MAX_NULL_DIMENSION,
    cluster_cut,
    effective_dimension,
    null_ratios,
    split_p_value,
)


def _distances(
    x: NDArray[np.float64], salt: str
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.bool_]]:
    n = x.shape[0]
    probe = initial_probe(tuple(range(n)), min_reference_size=3, salt=salt)
    inside = np.isin(np.arange(n), probe)
    d_centre = ((x - x.mean(axis=0)) ** 2).sum(axis=1)
    d_probe = ((x - x[inside].mean(axis=0)) ** 2).sum(axis=1)
    return d_centre, d_probe, inside


def _false_split_rate(
    n: int, scales: NDArray[np.float64], trials: int, draws: int, alpha: float
) -> float:
    rng = np.random.default_rng(2026)
    hits = 0
    for k in range(trials):
        x = rng.standard_normal((n, scales.shape[0])) * scales
        test = split_p_value(*_distances(x, f"t{k}"), draws=draws, seed=f"s{k}", min_size=3)
        hits += test.p_value <= alpha
    return hits / trials


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
@pytest.mark.parametrize(
    ("n", "scales"),
    [(8, np.ones(32)), (10, 1.0 / np.sqrt(np.arange(1.0, 65.0)))],
    ids=["isotropic-8", "anisotropic-10"],
)
def test_false_split_rate_is_alpha_within_its_binomial_error(
    n: int, scales: NDArray[np.float64]
) -> None:
    """400 single-group clusters at alpha = 0.05 (19 null draws: alpha (B + 1) = 1): the
    rate of p <= alpha lies within three binomial standard errors (0.011) of 0.05."""
    rate = _false_split_rate(n, scales, trials=400, draws=19, alpha=0.05)
    assert abs(rate - 0.05) <= 3 * np.sqrt(0.05 * 0.95 / 400), rate


def test_two_separated_groups_split_along_their_gap() -> None:
    """4 + 5 members 25 apart (noise 1 per coordinate, 32 dimensions), one round each: the
    cut is always the two groups; it is significant at 1% unless the beacon's 3-member probe
    holds the groups in nearly their overall proportion (1 of 3 against 4 of 9: almost no
    axis; a later round's probe parts them, tests/crypto/test_clustering.py). Measured: 20
    of 30 significant."""
    rng = np.random.default_rng(7)
    significant = 0
    for k in range(30):
        x = rng.standard_normal((9, 32))
        x[:4, 0] += 25.0
        test = split_p_value(*_distances(x, f"p{k}"), draws=99, seed=f"q{k}", min_size=3)
        if test.p_value <= 0.01:
            assert set(test.cut.high) in ({0, 1, 2, 3}, {4, 5, 6, 7, 8})
            significant += 1
    assert significant >= 15


def test_p_value_counts_the_null_ratios_at_or_below_the_observed() -> None:
    x = np.random.default_rng(3).standard_normal((8, 16))
    d_centre, d_probe, inside = _distances(x, "kat")
    test = split_p_value(d_centre, d_probe, inside, draws=49, seed="beacon|0", min_size=3)
    observed = cluster_cut(d_centre, d_probe, inside, min_size=3, max_trim=2, trim_factor=3.0)
    null = null_ratios(
        inside,
        test.dimension,
        draws=49,
        seed="beacon|0",
        min_size=3,
        max_trim=2,
        trim_factor=3.0,
    )
    assert test.cut == observed
    assert test.p_value == (1 + int((null <= observed.ratio).sum())) / 50


def test_null_draws_are_a_function_of_the_seed_only() -> None:
    inside = np.array([1, 0, 1, 0, 1, 0, 0, 0], dtype=bool)
    kwargs = dict(draws=30, min_size=3, max_trim=2, trim_factor=3.0)
    a = null_ratios(inside, 20, seed="beacon-a|0", **kwargs)  # type: ignore[arg-type]
    b = null_ratios(inside, 20, seed="beacon-a|0", **kwargs)  # type: ignore[arg-type]
    c = null_ratios(inside, 20, seed="beacon-b|0", **kwargs)  # type: ignore[arg-type]
    assert np.array_equal(a, b)
    assert not np.array_equal(a, c)


def test_effective_dimension_known_answers() -> None:
    d = np.array([1.0, 3.0])  # mean 2, var 2: 4
    assert effective_dimension(d) == 4
    assert effective_dimension(np.full(5, 7.0)) == MAX_NULL_DIMENSION
    assert effective_dimension(np.array([0.0, 100.0])) == 1
    with pytest.raises(ParameterError, match="d_centre"):
        effective_dimension(np.array([1.0]))


def test_secpc_step_is_deterministic_in_the_salt_and_records_p_values() -> None:
    rng = np.random.default_rng(11)
    x = rng.standard_normal((10, 24))
    x[:5] += 10.0
    membership = Membership.initial(range(10))
    refs = membership.reference_sets(
        range(10), min_aggregation_size=3, min_reference_size=3, salt="round-1"
    )
    assert refs is not None
    distances = plaintext_distances(list(x), refs)
    config = ClusteringConfig(false_split_rate=0.05, null_draws=99)
    one = secpc_step(distances, membership, config, salt="round-1")
    two = secpc_step(distances, membership, config, salt="round-1")
    assert one == two
    assert set(one.split_p_values) == set(one.split_ratios) == {0}
    assert one.splits
    assert one.splits[0].p_value == one.split_p_values[0] <= 0.05
    assert set(one.splits[0].members) in ({0, 1, 2, 3, 4}, {5, 6, 7, 8, 9})


def test_a_frozen_cluster_is_tested_but_does_not_split() -> None:
    rng = np.random.default_rng(11)
    x = rng.standard_normal((10, 24))
    x[:5] += 10.0
    membership = Membership.initial(range(10))
    refs = membership.reference_sets(
        range(10), min_aggregation_size=3, min_reference_size=3, salt="round-1"
    )
    assert refs is not None
    config = ClusteringConfig(false_split_rate=0.05, null_draws=99)
    step = secpc_step(
        plaintext_distances(list(x), refs),
        membership,
        config,
        salt="round-1",
        frozen=frozenset({0}),
    )
    assert not step.splits
    assert step.split_p_values[0] <= 0.05


def test_config_refuses_a_rate_outside_its_range() -> None:
    for bad in (0.0, 0.6):
        with pytest.raises(ParameterError, match="false_split_rate"):
            ClusteringConfig(false_split_rate=bad)
    with pytest.raises(ParameterError, match="null_draws"):
        ClusteringConfig(null_draws=5)


@given(
    values=st.lists(
        st.floats(-1e12, 1e12, allow_nan=False, allow_subnormal=False) | st.integers(-3, 3),
        min_size=1,
        max_size=60,
    ),
    q=st.sampled_from([0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 100.0]),
)
def test_the_sort_based_median_and_percentile_are_numpys_bit_for_bit(
    values: list[float], q: float
) -> None:
    """The split rule's null draws run these on a cluster's few dozen values thousands of
    times per round; they must give numpy's exact floats (ties and repeats included), so
    that every coordinator and replica computes the same p-values as before."""
    x = np.array(values, dtype=np.float64)
    s = np.sort(x)
    assert split_rule._median_sorted(s) == float(np.median(x))
    assert split_rule._percentile_sorted(s, q) == float(np.percentile(x, q))
