"""The coded SecPC distance path against the plaintext reference, and clustering on it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfpp.crypto.clustering import ClusteringConfig, Membership, StepResult, secpc_step
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.params import CodeSpec, CryptoParams, FieldSpec, distance_colluders
from secfpp.crypto.quantize import dequantize, quantize
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.secpc import (
    Distances,
    ReferenceSets,
    coded_distances,
    decode_distances,
    plaintext_distances,
)


def _params(n: int, r: int, k: int = 1, t: int | None = None) -> CryptoParams:
    """One colluder; the distance stage's ``T_c`` defaults to the smallest equivocation-safe
    one and the aggregation code has ``R_a = (n + 1) // 2 + 1``, the smallest with
    ``2 R_a - 1 > n``."""
    return CryptoParams(
        n_participants=n,
        reduced_dim=r,
        clustering_code=CodeSpec(k, distance_colluders(n, 1) if t is None else t),
        aggregation_code=CodeSpec((n + 1) // 2, 1),
        clustering_field=FieldSpec(2**61 - 1, 16, 4.0),
        min_aggregation_size=2,
    )


def decisions(result: StepResult) -> tuple:
    """What a clustering step decided (its float statistics aside)."""
    return (
        result.membership,
        result.assignment,
        [(s.parent, s.child, s.members) for s in result.splits],
        [(m.kept, m.removed) for m in result.merges],
    )


def coded_round(
    vectors: np.ndarray, refs: ReferenceSets, params: CryptoParams, seed: int, drop: int = 0
) -> tuple[Distances, list[np.ndarray]]:
    """Every participant shares, every participant computes, the coordinator decodes."""
    spec = params.clustering_field
    code = params.clustering_lcc()
    rng = DeterministicRandom(seed)
    q = {
        i: quantize(vectors[i], code.field, bits=spec.bits, clip=spec.clip)
        for i in refs.participants
    }
    shares = {i: code.share(q[i], rng) for i in refs.participants}
    answering = list(range(params.n_participants))[drop:]
    results = {
        j: coded_distances(code.field, {i: shares[i][j] for i in refs.participants}, refs)
        for j in answering
    }
    distances, _ = decode_distances(code, results, refs, spec)
    real = [dequantize(q[i], code.field, bits=spec.bits) for i in range(len(q))]
    return distances, real


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[np.ndarray, ReferenceSets, CryptoParams, int]:
    n = draw(st.integers(5, 9))
    r = draw(st.integers(2, 24))
    k = 1
    t = distance_colluders(n, 1)  # the smallest T_c with 2 (2 T_c + 1) - 1 > n
    labels = draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))
    clusters = []
    for c in sorted(set(labels)):
        clusters.append((c, tuple(i for i in range(n) if labels[i] == c)))
    probes = tuple(
        (c, members[: draw(st.integers(1, len(members) - 1))])
        for c, members in clusters
        if len(members) > 1 and draw(st.booleans())
    )
    seed = draw(st.integers(0, 2**32))
    vectors = np.random.default_rng(seed).normal(0, 1, (n, r))
    refs = ReferenceSets(tuple(range(n)), tuple(clusters), probes)
    return vectors, refs, _params(n, r, k, t), seed


@given(scenarios())
def test_coded_distances_equal_plaintext(case: tuple) -> None:
    vectors, refs, params, seed = case
    coded, real = coded_round(vectors, refs, params, seed)
    # On the same quantized data the coded path is exact up to float rounding.
    exact = plaintext_distances(real, refs)
    np.testing.assert_allclose(coded.point, exact.point, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(coded.centre, exact.centre, rtol=1e-9, atol=1e-12)
    # Against the unquantized vectors the error is the quantization error (step 2**-16).
    raw = plaintext_distances(np.clip(vectors, -4, 4), refs)
    np.testing.assert_allclose(coded.point, raw.point, rtol=1e-3, atol=1e-3)
    config = ClusteringConfig(min_aggregation_size=2)
    membership = Membership(refs.clusters, refs.probes, next_id=3)
    assert decisions(secpc_step(coded, membership, config)) == decisions(
        secpc_step(exact, membership, config)
    )


def test_decode_tolerates_dropouts_within_threshold() -> None:
    params = _params(9, 8, k=1)  # T_c = 3: threshold 2*3+1 = 7 of 9 (2*7 - 1 > 9)
    assert params.clustering_lcc().recovery_threshold(2) == 7
    vectors = np.random.default_rng(0).normal(0, 1, (9, 8))
    refs = ReferenceSets(tuple(range(9)), ((0, tuple(range(9))),))
    coded, real = coded_round(vectors, refs, params, seed=1, drop=2)
    np.testing.assert_allclose(coded.point, plaintext_distances(real, refs).point, rtol=1e-9)


def test_reference_sets_validation() -> None:
    with pytest.raises(ParameterError, match="'participants'"):
        ReferenceSets((2, 1), ((0, (1, 2)),))
    with pytest.raises(ParameterError, match="did not share"):
        ReferenceSets((0, 1), ((0, (1, 2)),))
    with pytest.raises(ParameterError, match="'probes'"):
        ReferenceSets((0, 1, 2), ((0, (1, 2)),), ((5, (1,)),))
    with pytest.raises(ParameterError, match="proper subset"):
        ReferenceSets((0, 1, 2), ((0, (1, 2)),), ((0, (1, 2)),))


def separated_groups(
    sizes: list[int], r: int, seed: int, gap: float = 4.0
) -> tuple[np.ndarray, list[int]]:
    rng = np.random.default_rng(seed)
    sigma = 0.1
    centres = rng.normal(0, 1, (len(sizes), r))
    centres *= gap * np.sqrt(r) * sigma / np.linalg.norm(centres, axis=1, keepdims=True)
    vectors, labels = [], []
    for g, size in enumerate(sizes):
        vectors.append(centres[g] + rng.normal(0, sigma, (size, r)))
        labels += [g] * size
    order = rng.permutation(sum(sizes))
    return np.vstack(vectors)[order], [labels[i] for i in order]


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
@pytest.mark.parametrize(("sizes", "seed"), [([6, 6], 0), ([4, 4, 4], 1), ([5, 4, 3], 2)])
def test_coded_secpc_finds_well_separated_groups(sizes: list[int], seed: int) -> None:
    n, r = sum(sizes), 16
    vectors, labels = separated_groups(sizes, r, seed)
    params = _params(n, r, k=1)
    config = ClusteringConfig(min_aggregation_size=2, max_clusters=6)
    membership = Membership.initial(range(n))
    for round_index in range(4 + 4 * len(sizes)):  # one change per round, random probes
        refs = membership.reference_sets(
            range(n), min_aggregation_size=2, min_reference_size=3, salt=f"{round_index}"
        )
        assert refs is not None
        coded, real = coded_round(vectors, refs, params, seed=100 + round_index)
        result = secpc_step(coded, membership, config)
        reference = secpc_step(plaintext_distances(real, refs), membership, config)
        assert decisions(result) == decisions(reference)
        membership = result.membership
    found = sorted(sorted(m) for _, m in membership.clusters)
    truth = sorted(sorted(i for i in range(n) if labels[i] == g) for g in range(len(sizes)))
    assert found == truth


def test_one_compact_group_is_not_split() -> None:
    n, r = 10, 16
    vectors = np.random.default_rng(3).normal(0, 0.1, (n, r))
    params = _params(n, r, k=1, t=3)
    config = ClusteringConfig(min_aggregation_size=2)
    membership = Membership.initial(range(n))
    for round_index in range(4):
        refs = membership.reference_sets(
            range(n), min_aggregation_size=2, min_reference_size=3, salt=f"{round_index}"
        )
        assert refs is not None
        coded, _ = coded_round(vectors, refs, params, seed=round_index)
        membership = secpc_step(coded, membership, config).membership
    assert [m for _, m in membership.clusters] == [tuple(range(n))]


def _defining_result(prime: int, shares: dict[int, np.ndarray], refs: ReferenceSets) -> list[int]:
    """The member's result vector straight from the module docstring's definition, in
    Python integers: delta over (participant, reference set), then eps over cluster pairs."""
    sets = [
        [int(v) for v in np.sum([shares[i] for i in m], axis=0, dtype=object)] for m in refs.sets
    ]
    out = []
    for i in refs.participants:
        for members, total in zip(refs.sets, sets, strict=True):
            m = len(members)
            out.append(
                sum((m * int(x) - s) ** 2 for x, s in zip(shares[i], total, strict=True)) % prime
            )
    clusters = refs.clusters
    for a, b in refs.cluster_pairs:
        m_a, m_b = len(clusters[a][1]), len(clusters[b][1])
        sa = [int(v) for v in np.sum([shares[i] for i in clusters[a][1]], axis=0, dtype=object)]
        sb = [int(v) for v in np.sum([shares[i] for i in clusters[b][1]], axis=0, dtype=object)]
        out.append(sum((m_b * x - m_a * y) ** 2 for x, y in zip(sa, sb, strict=True)) % prime)
    return out


@given(
    scenarios(),
    st.sampled_from([2**61 - 1, 2**31 - 1, 998_244_353, 65_537, 1_000_003]),
    st.sampled_from(["uniform", "extremes"]),
)
def test_member_result_is_the_defining_sum_for_any_field_elements(
    case: tuple, prime: int, kind: str
) -> None:
    """The expanded form m**2|x|**2 - 2m<x, Sum> + |Sum|**2 that :func:`coded_distances`
    computes equals the defining sum of squares mod p for any shares, including the
    largest field elements (where an overflow in the expansion would show)."""
    from secfpp.crypto.field import PrimeField

    vectors, refs, _, seed = case
    gen = np.random.default_rng(seed)
    n, r = vectors.shape
    if kind == "uniform":
        values = gen.integers(0, prime, (n, r), dtype=np.int64)
    else:
        values = gen.choice(np.array([0, 1, prime - 2, prime - 1], dtype=np.int64), (n, r))
    shares = {i: values[i] for i in range(n)}
    got = coded_distances(PrimeField(prime), shares, refs)
    assert got.dtype == np.int64
    assert [int(v) for v in got] == _defining_result(prime, shares, refs)


def test_member_result_names_the_share_out_of_range() -> None:
    from secfpp.crypto.field import PrimeField

    refs = ReferenceSets((0, 1, 2), ((0, (0, 1, 2)),), ())
    shares = {0: np.array([1, 2]), 1: np.array([3, 97]), 2: np.array([0, 0])}
    with pytest.raises(ParameterError, match=r"shares\[1\]"):
        coded_distances(PrimeField(97), shares, refs)
    with pytest.raises(ParameterError, match=r"shares\[2\]"):
        coded_distances(PrimeField(97), {**shares, 1: np.array([3, 4]), 2: np.array([-1, 0])}, refs)
