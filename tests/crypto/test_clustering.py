"""secpc_step and the probe split test (docs/protocol.md, "Clustering step")."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfpp.crypto.clustering import (
    ClusteringConfig,
    Membership,
    inherit_prompts,
    initial_probe,
    probe_size,
    secpc_step,
)
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.secpc import Distances, ReferenceSets, plaintext_distances
from secfpp.crypto.split_rule import (
    axis_projections,
    best_cut,
    far_members,
    probe_between_fraction,
    probe_coordinates,
)
from tests.support.clustering import fixed_point_steps

CONFIG = ClusteringConfig(min_aggregation_size=2, max_clusters=4)


def table(
    refs: ReferenceSets, point: list[list[float]], centre: list[list[float]] | None = None
) -> Distances:
    n_c = len(refs.clusters)
    return Distances(refs, np.array(point, dtype=float), np.array(centre or np.zeros((n_c, n_c))))


def two_groups(
    rng: np.random.Generator, sizes: tuple[int, ...], *, gap: float, r: int = 128
) -> np.ndarray:
    """Groups of unit-variance points, centres ``gap * sqrt(r)`` apart from the origin
    in random directions (so about ``gap * sqrt(2 r)`` apart from each other)."""
    centres = rng.standard_normal((len(sizes), r))
    centres *= gap * np.sqrt(r) / np.linalg.norm(centres, axis=1, keepdims=True)
    labels = np.repeat(np.arange(len(sizes)), sizes)
    return centres[labels] + rng.standard_normal((sum(sizes), r))


def test_members_keep_their_cluster_and_a_newcomer_joins_where_joining_adds_least() -> None:
    """Members never move between clusters (a move is a membership change participants
    refuse, crypto.refset_rules); a present participant in no cluster joins the cluster
    of least ``m' / (m' + 1) D[i, c']``, ties to the lowest id."""
    refs = ReferenceSets((0, 1, 2, 3, 4), ((0, (0, 1)), (1, (2, 3))))
    d = table(refs, [[1.5, 4.5], [3, 4], [5, 1], [2, 3], [6, 5]], [[0, 100], [100, 0]])
    # p1 and p3 are nearer the other cluster (Hartigan's rule moved them): they stay.
    result = secpc_step(d, Membership(refs.clusters, (), 2), CONFIG)
    assert result.assignment == {0: 0, 1: 0, 2: 1, 3: 1, 4: 1}  # p4: 4 vs 10/3
    assert result.membership.clusters == ((0, (0, 1)), (1, (2, 3, 4)))
    tie = table(refs, [[1, 1], [1, 1], [1, 1], [1, 1], [3, 3]], [[0, 100], [100, 0]])
    assert secpc_step(tie, Membership(refs.clusters, (), 2), CONFIG).assignment[4] == 0


@given(
    n=st.integers(min_value=4, max_value=12),
    r=st.integers(min_value=1, max_value=9),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
    data=st.data(),
)
def test_axis_projections_are_exact_and_the_correction_is_one_noise_level(
    n: int, r: int, seed: int, data: st.DataObject
) -> None:
    """Exact comparison with the plaintext definition, from distances alone."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, r)) * rng.uniform(0.1, 10)
    m = data.draw(st.integers(min_value=2, max_value=n - 2))
    probe = tuple(sorted(rng.choice(n, size=m, replace=False).tolist()))
    refs = ReferenceSets(tuple(range(n)), ((0, tuple(range(n))),), ((0, probe),))
    d = plaintext_distances(x, refs)
    inside = np.isin(np.arange(n), probe)
    t, axis2 = axis_projections(d.point[:, 0], d.point[:, 1], inside)
    mu = x.mean(axis=0)
    rest = [j for j in range(n) if j not in probe]
    axis = x[list(probe)].mean(axis=0) - x[rest].mean(axis=0)
    scale = 1e-7 * float((x**2).sum())
    np.testing.assert_allclose(t, (x - mu) @ axis, rtol=1e-7, atol=scale)
    assert axis2 == pytest.approx(float(axis @ axis), rel=1e-7, abs=scale)
    # The coordinate moves members of P down and the others up by one noise level nu >= 0.
    f = probe_coordinates(d.point[:, 0], d.point[:, 1], inside)
    pull = np.where(inside, 1.0 / m, -1.0 / (n - m))
    nu = (t - f) / pull
    assert np.all(nu >= -scale)
    np.testing.assert_allclose(nu, nu[0], rtol=1e-6, atol=scale)
    assert nu[0] <= float(np.median(((x - mu) ** 2).sum(axis=1))) + scale


def test_probe_coordinates_validate_their_input() -> None:
    with pytest.raises(ParameterError, match="'in_probe'"):
        probe_coordinates(np.ones(4), np.ones(4), np.array([True, False, False, False]))
    with pytest.raises(ParameterError, match="'d_probe'"):
        probe_coordinates(np.ones(4), np.ones(3), np.array([True, True, False, False]))


def test_best_cut_on_a_worked_example() -> None:
    f = np.array([0.0, 0.1, -0.1, 5.0, 5.2, 4.8])
    cut = best_cut(f, min_size=3)
    # Within: 2 * (0.01 + 0 + 0.01); total: sum of squares about the mean 2.5.
    within = 0.02 + 0.08
    total = float(((f - f.mean()) ** 2).sum())
    assert cut.ratio == pytest.approx(within / total)
    assert cut.high == (3, 4, 5)
    assert cut.trimmed == ()
    assert best_cut(np.zeros(6), min_size=3).ratio == 1.0  # no variation: no cut
    assert best_cut(f, min_size=4).high == ()  # no cut leaves 4 on both sides


def test_best_cut_trims_a_far_pair_but_not_a_small_true_group() -> None:
    rng = np.random.default_rng(0)
    groups = np.concatenate([rng.normal(0, 0.1, 4), rng.normal(3, 0.1, 4)])
    with_pair = np.concatenate([groups, [40.0, 40.1]])
    plain = best_cut(with_pair, min_size=3, max_trim=0)
    trimmed = best_cut(with_pair, min_size=3)
    assert plain.ratio > 0.05
    assert trimmed.ratio < 0.02
    assert set(trimmed.trimmed) == {8, 9}
    assert set(trimmed.high) == {4, 5, 6, 7, 8, 9}  # the pair joins the nearer side
    small = np.concatenate([rng.normal(0, 0.1, 7), rng.normal(3, 0.1, 3)])
    cut = best_cut(small, min_size=3)
    assert cut.trimmed == ()
    assert cut.high == (7, 8, 9)


def _rounds_to_split(
    x: np.ndarray, config: ClusteringConfig, rounds: int = 6, jitter: float = 0.2, seed: int = 0
) -> tuple[int | None, Membership]:
    """Run ``rounds`` clustering steps on ``x`` plus fresh jitter; first split round."""
    membership = Membership.initial(range(x.shape[0]))
    steps = fixed_point_steps(
        x, config, rounds=rounds, salt=f"s{seed}", jitter=jitter, rng=np.random.default_rng(seed)
    )
    for number, result in enumerate(steps, start=1):
        membership = result.membership
        if result.splits:
            return number, membership
    return None, membership


def _purity(membership: Membership, truth: np.ndarray) -> float:
    agree = sum(np.bincount(truth[list(m)]).max() for _, m in membership.clusters)
    return agree / truth.size


@pytest.mark.parametrize("sizes", [(5, 5), (4, 4), (7, 3)])
def test_two_groups_part_within_six_rounds(sizes: tuple[int, int]) -> None:
    """Unequal groups too: a small domain is not swallowed by a large one. 20 seeds.

    Probes are drawn at random each round (crypto.refset_rules: the coordinator may not
    steer them), so a split takes more rounds than with the refined probes of earlier
    versions (18 of 20 within three rounds then). Measured: 16, 16 and 20 of 20 within
    six rounds (11, 12, 18 within three); every split made is pure. The calibrated rule at
    1% with 99 null draws (the same level as the default 199)."""
    config = ClusteringConfig(null_draws=99)
    truth = np.repeat([0, 1], sizes)
    parted = 0
    for seed in range(20):
        x = two_groups(np.random.default_rng(seed), sizes, gap=1.5)
        number, membership = _rounds_to_split(x, config, seed=seed)
        if number is not None:
            assert _purity(membership, truth) >= 0.9
            parted += 1
    assert parted >= 15


def _parted(sizes: tuple[int, int], gap: float, pair: float, trials: int = 30) -> int:
    """Trials (of ``trials``) in which two groups part (purity >= 0.9) within three
    rounds; with ``pair > 0`` two near-identical members of the first group sit
    ``pair * sqrt(r)`` out in a random direction (0.01 apart)."""
    config = ClusteringConfig(null_draws=99)
    truth = np.repeat([0, 1], sizes)
    parted = 0
    for seed in range(trials):
        rng = np.random.default_rng(seed)
        x = two_groups(rng, sizes, gap=gap)
        if pair:
            x[0] += pair * rng.standard_normal(128)
            x[1] = x[0] + 0.01 * rng.standard_normal(128)
        number, membership = _rounds_to_split(x, config, seed=seed)
        if number is not None and _purity(membership, truth) >= 0.9:
            parted += 1
    return parted


@pytest.mark.slow  # over 7 s: left out of the inner loop (bash dev.sh quick)
@pytest.mark.parametrize(
    ("sizes", "gap", "pair"),
    [((5, 5), 2.5, 1.5), ((5, 5), 2.5, 3.0), ((5, 5), 1.5, 1.5), ((4, 4), 2.5, 1.5)],
)
def test_a_near_identical_outlying_pair_does_not_block_the_split(
    sizes: tuple[int, int], gap: float, pair: float
) -> None:
    """The review's case: a near-identical pair of outliers inside one domain (DESIGN's
    singleton candidate was always one of them: 0 of 30 splits against 28 of 30 without
    the pair). With beacon-drawn probes (no refinement towards the groups) the pair
    still costs some power: measured (30 trials, six rounds) without / with the pair
    30/30, 30/25, 29/21, 30/29 for the four cases here (24/24, 24/19, 24/16, 22/20 before
    the lower-quartile noise estimate; 30/30 everywhere with refined
    probes, which let the coordinator choose its sets; ``python -m bench.clustering.probe_split``,
    docs/protocol.md section 4)."""
    without = _parted(sizes, gap, 0.0)
    with_pair = _parted(sizes, gap, pair)
    assert without >= 20
    assert with_pair >= without - 10, (with_pair, without)


def test_far_members_sets_aside_a_far_pair_but_not_a_small_group() -> None:
    rng = np.random.default_rng(3)
    x = rng.standard_normal((10, 128))
    x[0] += 4.0 * rng.standard_normal(128)
    x[1] = x[0] + 0.01 * rng.standard_normal(128)
    d = ((x - x.mean(axis=0)) ** 2).sum(axis=1)
    far = far_members(d, max_trim=2, trim_factor=3.0, group_size=3)
    assert np.flatnonzero(far).tolist() == [0, 1]
    assert not far_members(d, max_trim=0, trim_factor=3.0, group_size=3).any()
    # three far members may be a true group of min_aggregation_size: nobody set aside
    x[2] = x[0] + 0.01 * rng.standard_normal(128)
    d = ((x - x.mean(axis=0)) ** 2).sum(axis=1)
    assert not far_members(d, max_trim=2, trim_factor=3.0, group_size=3).any()


@pytest.mark.slow  # over 7 s: left out of the inner loop (bash dev.sh quick)
def test_false_split_rate_of_one_group_is_at_most_five_percent() -> None:
    """One isotropic group of 6, 8 and 10 in 128 dimensions, 3 rounds, 60 seeds each:
    at the default false-split rate (0.05, spent over a cluster's tests) at most
    ``0.05 (1 - 1/4)``, under 4 %, of the federations split; the bound allows three
    binomial errors (3 of 60 -> 7)."""
    config = ClusteringConfig(null_draws=99)
    for n, bound in ((6, 7), (8, 7), (10, 7)):
        splits = 0
        for seed in range(60):
            x = np.random.default_rng(1000 + seed).standard_normal((n, 128))
            number, _ = _rounds_to_split(x, config, rounds=3, seed=seed)
            splits += number is not None
        assert splits <= bound, (n, splits)


def test_a_step_makes_at_most_one_split_and_carries_no_probe() -> None:
    """Two clusters that would both split: only the cleaner cut splits this round (one
    change per round, crypto.refset_rules), and no probe is carried over (the next
    round draws its probes from its beacon)."""
    rng = np.random.default_rng(3)
    base = rng.standard_normal((4, 32)) * 4
    x = np.repeat(base, 4, axis=0) + 0.1 * rng.standard_normal((16, 32))
    x[:4] += 0.5 * rng.standard_normal(32)  # the first cluster's gap is the larger
    first, second = tuple(range(8)), tuple(range(8, 16))
    refs = ReferenceSets(
        tuple(range(16)), ((0, first), (1, second)), ((0, (0, 1, 4)), (1, (8, 9, 12)))
    )
    config = ClusteringConfig(max_clusters=8)
    result = secpc_step(plaintext_distances(x, refs), Membership(refs.clusters, (), 2), config)
    assert set(result.split_ratios) == {0, 1}
    assert len(result.splits) == 1
    split = result.splits[0]
    assert split.ratio == min(result.split_ratios.values())
    assert result.membership.probes == ()
    assert result.merges == ()
    assert len(result.membership.clusters) == 3


@given(
    n=st.integers(min_value=2, max_value=40),
    minimum=st.integers(min_value=1, max_value=5),
    salt=st.text(max_size=8),
)
def test_initial_probe_is_coprime_near_half_and_leaves_both_parts_large_enough(
    n: int, minimum: int, salt: str
) -> None:
    members = tuple(range(100, 100 + n))
    probe = initial_probe(members, min_reference_size=minimum, salt=salt)
    assert probe == initial_probe(members, min_reference_size=minimum, salt=salt)
    fits = [k for k in range(1, n) if min(k, n - k) >= minimum]
    if not probe:
        assert not fits
        return
    m = len(probe)
    assert set(probe) < set(members)
    assert m == probe_size(n, min_reference_size=minimum)
    assert min(m, n - m) >= minimum
    near = [k for k in fits if abs(2 * k - n) <= 2]
    if near:
        assert abs(2 * m - n) <= 2
    if any(math.gcd(k, n) == 1 for k in near):
        assert math.gcd(m, n) == 1
        # so no grouping is ever held in exact proportion: k / m = s / n has no whole k
        # for any group of 1 <= s < n members
        assert all(s * m % n for s in range(1, n))
    elif n // 2 in near and n % 2 == 0:
        assert m == n // 2


def test_probe_sizes_known_answers() -> None:
    """Only odd ``n`` with ``n = 1 (mod 4)`` changed from the odd-size rule: it drew
    ``(n - 3) / 2`` there (3 of 9), in which three groups of three can be held one each."""
    sizes = {n: probe_size(n, min_reference_size=3) for n in range(5, 19)}
    assert sizes == {
        5: 0,
        6: 3,
        7: 3,
        8: 3,
        9: 4,
        10: 5,
        11: 5,
        12: 5,
        13: 6,
        14: 7,
        15: 7,
        16: 7,
        17: 8,
        18: 9,
    }


def _three_groups(rng: np.random.Generator, size: int, rank: int = 4) -> np.ndarray:
    """``3 * size`` points in 128 dimensions: three group centres whose squared distances
    are about 32 times a member's mean squared offset from its centre, an offset in a
    ``rank``-dimensional subspace shared by all: the geometry of the data signals, whose
    within-domain spread has a participation ratio of 3-6 and whose closest two domains lie
    5-560 times that spread apart (squared; medians over seeds of the held-out and tuning
    three-domain federations, printed | Greek letters only 2-10)."""
    centres = 8.0 * rng.standard_normal((3, 128)) / np.sqrt(128)
    basis = np.linalg.qr(rng.standard_normal((128, rank)))[0].T  # (rank, 128)
    offsets = rng.standard_normal((3 * size, rank)) @ basis
    return np.repeat(centres, size, axis=0) + offsets


def _found_all_three(x: np.ndarray, seed: int, rounds: int = 6) -> bool:
    """Whether six default clustering steps on the fixed points ``x`` (groups of
    ``len(x) / 3`` in order) end with the three groups as the three clusters."""
    n = x.shape[0]
    truth = [i * 3 // n for i in range(n)]
    *_, last = fixed_point_steps(x, ClusteringConfig(), rounds=rounds, salt=f"three{seed}")
    membership = last.membership
    groups = sorted(sorted({truth[i] for i in m}) for _, m in membership.clusters)
    return groups == [[0], [1], [2]]


@pytest.mark.parametrize(("size", "least"), [(3, 17), (4, 19)])
def test_three_well_separated_groups_are_all_found(size: int, least: int) -> None:
    """Issue 29's 3 + 3 + 3 case. Before, a probe of 3 of 9 (the odd-size rule) held one
    member of each group in a third of the draws, and the self-correction's noise estimate
    (a median of the across-axis lengths) took the third group's offset for noise and
    pushed the probe's members of the group it parts away from that group's others. On
    these 20 seeds the former rule found all three groups in 1 (3 + 3 + 3) and 17
    (4 + 4 + 4); a probe size coprime with ``n`` and the lower quartile find 19 and 20."""
    found = sum(
        _found_all_three(_three_groups(np.random.default_rng(s), size), s) for s in range(20)
    )
    assert found >= least, found


def test_merge_closest_pair_below_spread() -> None:
    refs = ReferenceSets(tuple(range(6)), ((0, (0, 1)), (1, (2, 3)), (2, (4, 5))))
    point = [[1, 5, 50], [1, 5, 50], [5, 1, 50], [5, 1, 50], [50, 50, 1], [50, 50, 1]]
    centre = [[0, 0.5, 40], [0.5, 0, 40], [40, 40, 0]]
    result = secpc_step(table(refs, point, centre), Membership(refs.clusters, (), 3), CONFIG)
    assert [(m.kept, m.removed) for m in result.merges] == [(0, 1)]
    assert result.membership.clusters == ((0, (0, 1, 2, 3)), (2, (4, 5)))


def test_absent_participants_keep_their_cluster() -> None:
    membership = Membership(((0, (0, 1, 2)), (1, (3, 4, 5))), (), 2)
    refs = membership.reference_sets(
        [0, 1, 3, 4], min_aggregation_size=2, min_reference_size=2, salt="t"
    )
    assert refs is not None
    assert refs.clusters == ((0, (0, 1)), (1, (3, 4)))
    d = table(refs, [[1, 9], [1, 9], [9, 1], [9, 1]], [[0, 50], [50, 0]])
    result = secpc_step(d, membership, CONFIG)
    assert result.membership.clusters == membership.clusters


def test_reference_sets_probe_only_large_clusters_and_leave_out_small_ones() -> None:
    six = (0, 1, 2, 3, 4, 5)
    membership = Membership(((0, six), (1, (6, 7, 8, 9, 10)), (2, (11, 12))), ((0, (0, 1)),), 3)
    refs = membership.reference_sets(
        range(13), min_aggregation_size=2, min_reference_size=3, salt="t"
    )
    assert refs is not None
    assert refs.clusters == ((0, six), (1, (6, 7, 8, 9, 10)))  # {11, 12} is too small
    # the stored probe is not used: the salt's draw, 3 of 6; cluster 1 has < 6 members
    assert refs.probes == ((0, initial_probe(six, min_reference_size=3, salt="t|0")),)
    assert len(refs.probes[0][1]) == 3
    assert set(refs.probes[0][1]) < set(six)
    refs = membership.reference_sets(
        [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
        min_aggregation_size=1,
        min_reference_size=3,
        salt="t",
    )
    assert refs is not None
    assert refs.probes == ()  # five present members of cluster 0: below MIN_TESTED_MEMBERS
    refs = membership.reference_sets(
        range(13), min_aggregation_size=1, min_reference_size=3, salt=None
    )
    assert refs is not None
    assert refs.probes == ()  # no beacon, no probe
    assert membership.aggregation_sets([0, 1, 6], min_aggregation_size=2) == [(0, (0, 1))]
    assert (
        membership.reference_sets([11], min_aggregation_size=2, min_reference_size=3, salt="")
        is None
    )


def test_membership_validation_and_round_trip() -> None:
    membership = Membership(((0, (0, 1)), (3, (2, 5, 6))), ((3, (5, 6)),), 4)
    assert Membership.from_dict(membership.to_dict()) == membership
    assert membership.cluster_of(5) == 3
    with pytest.raises(ParameterError, match="overlaps"):
        Membership(((0, (0, 1)), (1, (1, 2))), (), 2)
    with pytest.raises(ParameterError, match="'next_id'"):
        Membership(((0, (0, 1)), (1, (2,))), (), 1)
    with pytest.raises(ParameterError, match="'probes'"):
        Membership(((0, (0, 1)),), ((0, (0,)), (0, (1,))), 1)


def test_inherit_prompts() -> None:
    x = two_groups(np.random.default_rng(1), (3, 3), gap=8.0, r=16)
    refs = ReferenceSets(tuple(range(6)), ((0, tuple(range(6))),), ((0, (0, 1, 2)),))
    before = Membership(refs.clusters, refs.probes, 1)
    result = secpc_step(plaintext_distances(x, refs), before, CONFIG)
    assert len(result.splits) == 1
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


def test_clustering_config_is_validated() -> None:
    with pytest.raises(ParameterError, match="false_split_rate"):
        ClusteringConfig(false_split_rate=0.0)
    with pytest.raises(ParameterError, match="min_reference_size"):
        ClusteringConfig(min_reference_size=0)
    with pytest.raises(ParameterError, match="trim_factor"):
        ClusteringConfig(trim_factor=1.0)


def test_probe_between_fraction_is_the_two_means_statistic_of_the_probe_partition() -> None:
    """``B / T`` from ``D[., c]`` and ``D[., P]`` alone equals the plaintext value."""
    rng = np.random.default_rng(7)
    for n, m, r in ((8, 3, 16), (10, 5, 128), (6, 2, 3)):
        x = rng.standard_normal((n, r))
        probe = tuple(sorted(rng.choice(n, m, replace=False).tolist()))
        refs = ReferenceSets(tuple(range(n)), ((0, tuple(range(n))),), ((0, probe),))
        d = plaintext_distances(x, refs)
        inside = np.isin(np.arange(n), probe)
        total = ((x - x.mean(axis=0)) ** 2).sum()
        within = ((x[inside] - x[inside].mean(axis=0)) ** 2).sum() + (
            (x[~inside] - x[~inside].mean(axis=0)) ** 2
        ).sum()
        got = probe_between_fraction(d.point[:, 0], d.point[:, 1], inside)
        assert got == pytest.approx(1 - within / total, rel=1e-9)
    assert probe_between_fraction(np.zeros(4), np.zeros(4), np.array([1, 1, 0, 0], bool)) == 0
