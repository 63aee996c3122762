"""CryptoParams: validation, code choice and the overflow bounds of DESIGN.md section 2."""

from __future__ import annotations

import numpy as np
import pytest

from secfpp.crypto.errors import ParameterError
from secfpp.crypto.field import PrimeField
from secfpp.crypto.lcc import LagrangeCode
from secfpp.crypto.params import CodeSpec, CryptoParams, FieldSpec, choose_code, largest_safe_bits
from secfpp.crypto.quantize import quantize
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.secpc import ReferenceSets, coded_distances, decode_distances

P31 = 2**31 - 1


def test_choose_code_tolerates_dropouts_and_colluders() -> None:
    for n in (5, 8, 10, 50, 100):
        for degree in (1, 2):
            code = choose_code(n, dropouts=n // 4, colluders=max(1, n // 4), degree=degree)
            assert code.threshold(degree) <= n - n // 4
            bigger = CodeSpec(code.k + 1, code.t)
            assert bigger.threshold(degree) > n - n // 4
    with pytest.raises(ParameterError, match="'colluders'"):
        choose_code(4, dropouts=1, colluders=2, degree=2)


def test_for_federation_picks_safe_largest_bits() -> None:
    params = CryptoParams.for_federation(100)
    assert params.clustering_dropouts >= 25
    assert params.aggregation_dropouts >= 25
    assert params.clustering_code.t >= 25
    assert params.aggregation_code.t >= 25
    agg = params.aggregation_field
    with pytest.raises(ParameterError, match=r"aggregation_field\.bits"):
        CryptoParams(
            n_participants=100,
            reduced_dim=128,
            clustering_code=params.clustering_code,
            aggregation_code=params.aggregation_code,
            clustering_field=params.clustering_field,
            aggregation_field=FieldSpec(agg.prime, agg.bits + 1, agg.clip),
        )


@pytest.mark.parametrize(
    ("kwargs", "name"),
    [
        ({"n_participants": 1}, "n_participants"),
        ({"reduced_dim": 0}, "reduced_dim"),
        ({"l2_clip": -1.0}, "l2_clip"),
        ({"min_aggregation_size": 1}, "min_aggregation_size"),
        ({"max_clusters": 0}, "max_clusters"),
        ({"clustering_field": FieldSpec(P31, 20, 4.0)}, "clustering_field.bits"),
        ({"clustering_code": CodeSpec(3, 3)}, "clustering_code"),
        ({"aggregation_code": CodeSpec(7, 3)}, "aggregation_code"),
        ({"aggregation_code": CodeSpec(2, 2)}, "aggregation_code"),  # 2R - T = 6 <= 8
        ({"clustering_code": CodeSpec(1, 2)}, "clustering_code"),  # 2R - T = 8 <= 8
    ],
)
def test_rejects_each_bad_parameter(kwargs: dict, name: str) -> None:
    base = {
        "n_participants": 8,
        "reduced_dim": 16,
        "clustering_code": CodeSpec(1, 3),
        "aggregation_code": CodeSpec(4, 2),
    }
    with pytest.raises(ParameterError) as info:
        CryptoParams(**{**base, **kwargs})
    assert info.value.parameter == name


def test_field_spec_validation() -> None:
    with pytest.raises(ParameterError, match="'prime' must be prime"):
        FieldSpec(2**31, 8, 1.0)
    with pytest.raises(ParameterError, match="'bits'"):
        FieldSpec(P31, 60, 1.0)
    with pytest.raises(ParameterError, match="'clip'"):
        FieldSpec(P31, 8, float("nan"))


# --- at the bound it works exactly; one step past it is refused ---------------------------


def test_linear_sum_at_the_bound_is_exact() -> None:
    n = 6
    bits = largest_safe_bits(prime=P31, clip=1.0, n_participants=n, degree=1)
    spec = FieldSpec(P31, bits, 1.0)
    CryptoParams(
        n_participants=n,
        reduced_dim=4,
        clustering_code=CodeSpec(1, 2),
        aggregation_code=CodeSpec(3, 2),
        aggregation_field=spec,
    )
    code = LagrangeCode(spec.field, 3, 2, n)
    rng = DeterministicRandom(1)
    for sign in (1.0, -1.0):
        vectors = [quantize(np.full(5, sign), spec.field, bits=bits, clip=1.0) for _ in range(n)]
        shares = [code.share(v, rng) for v in vectors]
        sums = {j: spec.field.sum(np.vstack([s[j] for s in shares]), axis=0) for j in range(n)}
        decoded = spec.field.centered(code.decode(sums, degree=1).values.reshape(-1)[:5])
        assert decoded.tolist() == [int(sign) * n * 2**bits] * 5
    # One more bit and the same sum would exceed (p-1)/2: it wraps, and params refuse it.
    assert n * 2 ** (bits + 1) > (P31 - 1) // 2
    with pytest.raises(ParameterError, match=r"aggregation_field\.bits"):
        CryptoParams(
            n_participants=n,
            reduced_dim=4,
            clustering_code=CodeSpec(1, 2),
            aggregation_code=CodeSpec(3, 2),
            aggregation_field=FieldSpec(P31, bits + 1, 1.0),
        )


def test_distances_at_the_bound_are_exact_and_one_more_bit_is_refused() -> None:
    # A small prime makes the bound reachable with a handful of participants.
    prime, n, r, clip = 2**31 - 1, 5, 3, 1.0
    code_spec = CodeSpec(1, 2)
    bits = largest_safe_bits(prime=prime, clip=clip, n_participants=n, degree=2, chunk=r)
    spec = FieldSpec(prime, bits, clip)
    params = CryptoParams(
        n_participants=n,
        reduced_dim=r,
        clustering_code=code_spec,
        aggregation_code=CodeSpec(2, 2),
        clustering_field=spec,
        aggregation_field=FieldSpec(P31, 8, 1.0),
        min_aggregation_size=2,
    )
    code = params.clustering_lcc()
    F = spec.field
    # Worst case for point-centre: x_0 = +B, the other members at -B, centre of all five.
    xs = [np.full(r, clip)] + [np.full(r, -clip)] * (n - 1)
    q = [quantize(x, F, bits=bits, clip=clip) for x in xs]
    refs = ReferenceSets(tuple(range(n)), ((0, (1, 2)), (1, (0, 3, 4))))
    rng = DeterministicRandom(3)
    shares = [code.share(v, rng) for v in q]
    results = {j: coded_distances(F, {i: shares[i][j] for i in range(n)}, refs) for j in range(n)}
    distances, _ = decode_distances(code, results, refs, spec)
    # Exact integer reference: m*x_i - sum(S) in quantized units.
    s = 2**bits
    for i in range(n):
        for col, members in enumerate(refs.sets):
            exact = sum(
                (
                    len(members) * int(F.centered(q[i])[e])
                    - sum(int(F.centered(q[m])[e]) for m in members)
                )
                ** 2
                for e in range(r)
            )
            assert distances.point[i, col] == pytest.approx(
                exact / (s**2 * len(members) ** 2), rel=1e-12
            )
    with pytest.raises(ParameterError, match=r"clustering_field\.bits"):
        CryptoParams(
            n_participants=n,
            reduced_dim=r,
            clustering_code=code_spec,
            aggregation_code=CodeSpec(2, 2),
            clustering_field=FieldSpec(prime, bits + 1, clip),
            aggregation_field=FieldSpec(P31, 8, 1.0),
            min_aggregation_size=2,
        )


def test_bound_is_real_past_it_the_field_wraps() -> None:
    # Past the bound the decoded sum is wrong: the refusal protects against real wraps.
    n, bits = 4, 29
    F = PrimeField(P31)
    code = LagrangeCode(F, 1, 1, n)
    vectors = [quantize(np.ones(1), F, bits=bits, clip=1.0) for _ in range(n)]
    rng = DeterministicRandom(2)
    shares = [code.share(v, rng) for v in vectors]
    sums = {j: F.sum(np.vstack([s[j] for s in shares]), axis=0) for j in range(n)}
    decoded = int(F.centered(code.decode(sums, degree=1).values.reshape(-1)[:1])[0])
    assert decoded != n * 2**bits


def test_the_distance_stage_has_one_chunk_and_every_threshold_exceeds_half() -> None:
    """Issue: per-chunk partial distances and equivocation (docs/protocol.md)."""
    for n in (3, 8, 64, 100, 1024):
        params = CryptoParams.for_federation(n, reduced_dim=8)
        assert params.clustering_code.k == 1
        assert 2 * params.clustering_code.threshold(2) > n
        assert 2 * params.aggregation_code.threshold(1) > n
    with pytest.raises(ParameterError, match="K = 1"):
        CryptoParams(
            n_participants=16,
            reduced_dim=8,
            clustering_code=CodeSpec(2, 4),
            aggregation_code=CodeSpec(4, 6),
        )
    with pytest.raises(ParameterError, match="equivocation"):
        CryptoParams(
            n_participants=16,
            reduced_dim=8,
            clustering_code=CodeSpec(1, 3),  # 7 of 16
            aggregation_code=CodeSpec(4, 6),
        )
    with pytest.raises(ParameterError, match="dropout_fraction"):
        CryptoParams.for_federation(16, dropout_fraction=0.5)
