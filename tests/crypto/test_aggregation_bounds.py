"""The L2 bound that quantized updates actually satisfy, and decoding edge cases.

The DP sensitivity of a cluster sum is ``C`` (real units), ``C * 2**bits`` in quantized
units. Stochastic rounding moves each entry by up to one unit, so it can add up to
``sqrt(D)`` units to the norm; these tests check ``||q||_2 <= C s`` exactly (Python
integers, no float) on random and on adversarial vectors built to make rounding grow
the norm the most, and show that clipping to ``C`` alone (the old code) breaks it.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from secfpp.crypto.aggregation import (
    clip_update,
    decode_cluster_mean,
    decode_cluster_sum,
    enforce_l2_bound,
    prepare_update,
    quantize_update,
    rounding_margin,
)
from secfpp.crypto.dp.distributed import DistributedNoise
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.params import CryptoParams, FieldSpec
from secfpp.crypto.quantize import quantize_integers
from secfpp.crypto.rng import DeterministicRandom


def _squared(q: np.ndarray) -> int:
    return sum(int(v) * int(v) for v in q.reshape(-1))


def _within(q: np.ndarray, l2_clip: float, bits: int) -> bool:
    bound = Fraction(l2_clip) * 2**bits
    return _squared(q) <= bound * bound


def _adversarial(d: int, bits: int, whole: int, frac: float) -> tuple[np.ndarray, float]:
    """All entries at ``(whole + frac) / s``, and the clip ``C`` that leaves them unclipped
    after the rounding margin: every entry rounds *up* with probability ``frac``, all in
    the same direction, the largest norm growth stochastic rounding can produce."""
    s = 2**bits
    x = np.full(d, (whole + frac) / s)
    l2_clip = float(np.linalg.norm(x)) + math.sqrt(d) / s
    return x, l2_clip


# --- the enforced bound ---------------------------------------------------------------


@pytest.mark.parametrize(("d", "bits", "whole"), [(64, 4, 3), (512, 8, 0), (8192, 16, 1)])
def test_adversarial_vectors_stay_within_the_clip(d: int, bits: int, whole: int) -> None:
    spec = FieldSpec(prime=2**31 - 1, bits=bits, clip=1.0)
    x, l2_clip = _adversarial(d, bits, whole, frac=0.999)
    for seed in range(20):
        q = quantize_update(x, spec, l2_clip=l2_clip, rng=DeterministicRandom(seed))
        assert _within(q, l2_clip, bits), seed
        # Almost every entry rounded up: the margin was needed, not just harmless.
        assert np.mean(q == whole + 1) > 0.98


class _AlwaysUp(DeterministicRandom):
    """A worst-case source: every ``u`` is ``1 - 2**-53``, so every entry with a non-zero
    fractional part rounds *up*. Adversarial vectors with fractional parts just above 0
    then grow the norm by almost the full ``sqrt(D)`` units."""

    def uniform(self, shape: int | tuple[int, ...]) -> np.ndarray:
        return np.full(shape, 1.0 - 2.0**-53)


@pytest.mark.parametrize(("d", "bits"), [(64, 4), (512, 8), (8192, 16)])
def test_worst_case_rounding_stays_within_the_clip(d: int, bits: int) -> None:
    x, l2_clip = _adversarial(d, bits, whole=2, frac=1e-6)
    spec = FieldSpec(prime=2**61 - 1, bits=bits, clip=1.0)
    q = quantize_update(x, spec, l2_clip=l2_clip, rng=_AlwaysUp(0))
    assert _within(q, l2_clip, bits)
    # The clip to C - margin shrank x so that every entry sits just below 2 + 1e-6 ... and
    # rounding up used (nearly) the whole margin: the bound is tight, not loose.
    assert math.sqrt(_squared(q)) / 2**bits > l2_clip - 1.01 * rounding_margin(d, spec)


def test_clipping_to_c_before_rounding_alone_exceeds_the_bound() -> None:
    """What the code did before: clip to C, then round. Worst-case rounding breaks it by
    almost ``sqrt(D) / s``; the current code holds on the same input and source."""
    bits, d = 8, 512
    spec = FieldSpec(prime=2**31 - 1, bits=bits, clip=1.0)
    x = np.full(d, (2 + 1e-6) / 2**bits)
    l2_clip = float(np.linalg.norm(x))  # x sits exactly on the clip sphere
    old = quantize_integers(
        clip_update(x, l2_clip=l2_clip, entry_clip=1.0), bits=bits, clip=1.0, rng=_AlwaysUp(0)
    )
    assert not _within(old, l2_clip, bits)
    growth = math.sqrt(_squared(old)) / 2**bits - l2_clip
    assert growth > 0.99 * rounding_margin(d, spec)
    assert _within(quantize_update(x, spec, l2_clip=l2_clip, rng=_AlwaysUp(0)), l2_clip, bits)


finite = st.floats(min_value=-50.0, max_value=50.0, allow_nan=False, allow_infinity=False)


# more examples than the profile (cheap): the clip and rounding corner cases are rare draws
@settings(max_examples=150)
@given(
    x=arrays(np.float64, st.integers(1, 300), elements=finite),
    bits=st.integers(2, 20),
    l2_clip=st.floats(min_value=0.5, max_value=100.0),
    seed=st.integers(0, 2**32),
)
def test_quantized_updates_never_exceed_c_times_s(
    x: np.ndarray, bits: int, l2_clip: float, seed: int
) -> None:
    spec = FieldSpec(prime=2**61 - 1, bits=bits, clip=4.0)
    if rounding_margin(x.size, spec) >= l2_clip:
        with pytest.raises(ParameterError) as info:
            quantize_update(x, spec, l2_clip=l2_clip, rng=DeterministicRandom(seed))
        assert info.value.parameter == "l2_clip"
        return
    q = quantize_update(x, spec, l2_clip=l2_clip, rng=DeterministicRandom(seed))
    assert q.dtype == np.int64
    assert q.shape == (x.size,)
    assert _within(q, l2_clip, bits)
    assert int(np.max(np.abs(q))) <= spec.quantum_bound()


# more examples than the profile (cheap): the clip and rounding corner cases are rare draws
@settings(max_examples=150)
@given(
    whole=st.integers(0, 50),
    frac=st.floats(min_value=0.5, max_value=0.999999),
    d=st.integers(1, 2000),
    bits=st.integers(6, 16),
    seed=st.integers(0, 2**32),
)
def test_rounding_growth_is_absorbed_by_the_margin(
    whole: int, frac: float, d: int, bits: int, seed: int
) -> None:
    x, l2_clip = _adversarial(d, bits, whole, frac)
    spec = FieldSpec(prime=2**61 - 1, bits=bits, clip=64.0)
    q = quantize_update(x, spec, l2_clip=l2_clip, rng=DeterministicRandom(seed))
    assert _within(q, l2_clip, bits)


# more examples than the profile (cheap, exact arithmetic): the bound's corner cases are rare draws
@settings(max_examples=200)
@given(
    q=arrays(np.int64, st.integers(1, 200), elements=st.integers(-(2**40), 2**40)),
    num=st.integers(0, 2**50),
    den=st.integers(1, 2**20),
)
def test_enforce_l2_bound_is_exact(q: np.ndarray, num: int, den: int) -> None:
    bound = Fraction(num, den)
    out = enforce_l2_bound(q, bound)
    assert out.shape == q.shape
    assert out.dtype == np.int64
    assert _squared(out) <= bound * bound
    if _squared(q) <= bound * bound:
        np.testing.assert_array_equal(out, q)  # inside the ball: untouched
    else:  # scaled toward zero, never past it, never flipped
        assert np.all(np.abs(out) <= np.abs(q))
        assert np.all(np.sign(out) * np.sign(q) >= 0)


def test_quantize_update_refuses_a_clip_inside_the_rounding_margin() -> None:
    spec = FieldSpec(prime=2**31 - 1, bits=2, clip=1.0)  # margin sqrt(64) / 4 = 2
    with pytest.raises(ParameterError) as info:
        quantize_update(np.zeros(64), spec, l2_clip=2.0, rng=DeterministicRandom(0))
    assert info.value.parameter == "l2_clip"
    assert "rounding margin" in str(info.value)


# --- decoding -----------------------------------------------------------------------


def test_decode_cluster_mean_refuses_an_empty_result_set() -> None:
    params = CryptoParams.for_federation(8)
    for decode in (
        lambda: decode_cluster_mean(
            params.aggregation_lcc(), {}, length=10, spec=params.aggregation_field, contributors=3
        ),
        lambda: decode_cluster_sum(params.aggregation_lcc(), {}, length=10),
    ):
        with pytest.raises(ParameterError) as info:
            decode()
        assert info.value.parameter == "results"
        assert "at least one" in str(info.value)


def test_gdp_noise_needs_a_random_source() -> None:
    params = CryptoParams.for_federation(8)
    code, spec = params.aggregation_lcc(), params.aggregation_field
    shares = code.share(spec.field.asarray(np.zeros(10, np.int64)), DeterministicRandom(0))
    with pytest.raises(ParameterError) as info:
        decode_cluster_mean(
            code, dict(enumerate(shares)), length=10, spec=spec, contributors=3, noise_sigma=1.0
        )
    assert info.value.parameter == "rng"


def test_prepare_update_refuses_noise_of_another_federation() -> None:
    params = CryptoParams.for_federation(8)
    spec = params.aggregation_field
    noise = DistributedNoise(
        noise_multiplier=1.0, l2_clip=params.l2_clip, bits=spec.bits - 1, min_contributors=3
    )
    with pytest.raises(ParameterError) as info:
        prepare_update(
            np.zeros(10), spec, l2_clip=params.l2_clip, rng=DeterministicRandom(0), noise=noise
        )
    assert info.value.parameter == "noise"


def test_gdp_noise_is_discrete_gaussian_on_the_integer_sum() -> None:
    """The coordinator's GDP: the released mean times s*m is an integer vector (the noise
    went onto the decoded sum's lattice, exactly), and the noise has the asked std."""
    params = CryptoParams.for_federation(8)
    code, spec = params.aggregation_lcc(), params.aggregation_field
    d, m, sigma = 20_000, 4, 0.25  # sigma in real units of the mean, e.g. z C / m
    updates = np.random.default_rng(1).normal(0.0, 0.01, (m, d))
    q = [
        quantize_update(u, spec, l2_clip=params.l2_clip, rng=DeterministicRandom(i))
        for i, u in enumerate(updates)
    ]
    shares = [
        code.share(spec.field.asarray(v), DeterministicRandom(f"s{i}")) for i, v in enumerate(q)
    ]
    results = {j: spec.field.sum(np.vstack([s[j] for s in shares]), axis=0) for j in range(8)}
    clean, _ = decode_cluster_mean(code, results, length=d, spec=spec, contributors=m)
    np.testing.assert_array_equal(clean * spec.scale * m, sum(q))
    noisy, _ = decode_cluster_mean(
        code,
        results,
        length=d,
        spec=spec,
        contributors=m,
        noise_sigma=sigma,
        rng=DeterministicRandom(b"gdp"),
    )
    lattice = noisy * spec.scale * m
    np.testing.assert_array_equal(lattice, np.round(lattice))
    noise = noisy - clean
    assert abs(noise.std() - sigma) <= 5 * sigma / math.sqrt(2 * d)
    assert abs(noise.mean()) <= 5 * sigma / math.sqrt(d)


@given(
    st.integers(1, 2**21),
    st.integers(1, 4000),
    st.integers(0, 2**32 - 1),
)
def test_squared_norm_is_exact_in_both_paths(peak: int, size: int, seed: int) -> None:
    """The int64 fast path and the Python-integer path of ``_squared_norm`` agree with an
    exact sum, including vectors whose squares would overflow int64 (forced fallback)."""
    from secfpp.crypto.aggregation import _squared_norm

    gen = np.random.default_rng(seed)
    q = gen.integers(-peak, peak + 1, size, dtype=np.int64)
    exact = sum(int(v) * int(v) for v in q)
    assert _squared_norm(q) == exact
    huge = q.copy()
    huge[0] = -(2**62)  # squares overflow int64: must take the exact path
    assert _squared_norm(huge) == exact - int(q[0]) ** 2 + 2**124
