"""The offset check of the re-randomized distance stage (docs/protocol.md section 4).

A zero-sharing contribution that does not vanish at the data point shifts every decoded
distance and still gives a codeword (the known limit the check closes). With the check,
every contribution carries a mask, the request a challenge, and every recipient appends
``c_i = sum_o r_o rho_{i,o} + rho_{i,*}`` per contributor; the coordinator decodes them with
the outputs and names every contributor whose check is not zero at the data point.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secfpp.crypto.errors import DecodeError, OffsetCheckError, ParameterError
from secfpp.crypto.field import PrimeField
from secfpp.crypto.lcc import LagrangeCode
from secfpp.crypto.params import CryptoParams, FieldSpec
from secfpp.crypto.quantize import dequantize, quantize
from secfpp.crypto.reed_solomon import ReedSolomonCode
from secfpp.crypto.rerandomize import (
    CHALLENGE_SIZE,
    ZeroSharing,
    challenge_weights,
    checked_distances,
    contribution_length,
    expand_seed,
    offset_checks,
    output_bound,
    rerandomized_distances,
    sum_and_checks,
)
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.secpc import (
    ReferenceSets,
    decode_distances,
    offset_failures,
    plaintext_distances,
)

N = 9
SPEC = FieldSpec(2**61 - 1, 16, 4.0)
CHALLENGE = bytes(range(CHALLENGE_SIZE))


def _setup(seed: int, *, t: int = 2, n: int = N) -> tuple[LagrangeCode, ReferenceSets, dict]:
    code = LagrangeCode(SPEC.field, k=1, t=t, n=n)
    vectors = np.random.default_rng(seed).normal(0, 1, (n, 4))
    refs = ReferenceSets(
        tuple(range(n)), ((0, tuple(range(n // 2))), (1, tuple(range(n // 2, n)))), ((0, (0, 1)),)
    )
    q = {i: quantize(vectors[i], code.field, bits=SPEC.bits, clip=SPEC.clip) for i in range(n)}
    return code, refs, q


def _stage(
    code: LagrangeCode,
    refs: ReferenceSets,
    q: dict,
    rng: DeterministicRandom,
    *,
    offsets: dict[int, tuple[int, int]] | None = None,
    seeded: bool = False,
) -> dict[int, np.ndarray]:
    """Every recipient's checked results. ``offsets``: contributor -> (value at the data
    point of every output, value of its mask there): the cheaters."""
    n = code.n
    length = contribution_length(n, 2)
    shares = {i: code.share(q[i], rng) for i in refs.participants}
    contributions = {}
    for i in refs.participants:
        values = None
        if offsets and i in offsets:
            out, mask = offsets[i]
            values = np.full(length, out, dtype=np.int64)
            values[-1] = mask
        if seeded:
            c = ZeroSharing(code).contribute_seeded(length, rng, values=values)
            free = [expand_seed(s, code.field.prime, length) for s in c.seeds]
            contributions[i] = np.vstack([*free, c.derived])
        else:
            contributions[i] = ZeroSharing(code).contribute(length, rng, values=values)
    return {
        j: checked_distances(
            code.field,
            {i: shares[i][j] for i in refs.participants},
            {i: contributions[i][j] for i in refs.participants},
            refs,
            CHALLENGE,
        )
        for j in range(n)
    }


@pytest.mark.parametrize("seeded", [False, True])
def test_honest_contributions_pass_and_decode_exactly(seeded: bool) -> None:
    code, refs, q = _setup(1)
    results = _stage(code, refs, q, DeterministicRandom(b"honest"), seeded=seeded)
    assert all(r.shape == (refs.result_length + N,) for r in results.values())
    got, decoded = decode_distances(code, results, refs, SPEC, checked=refs.participants)
    assert decoded.rejected == ()
    assert decoded.values.shape == (1, refs.result_length)  # the checks are not distances
    real = {i: dequantize(q[i], code.field, bits=SPEC.bits) for i in range(N)}
    np.testing.assert_allclose(got.point, plaintext_distances(real, refs).point, rtol=1e-9)


def test_a_contribution_that_does_not_vanish_is_named() -> None:
    """The known limit, played with and without the check: the shifted results decode
    without complaint on the unchecked path, and the check names the contributor."""
    code, refs, q = _setup(2)
    offset = 7 * SPEC.scale**2 * 4**2  # +7.0 on the distances to the first cluster of 4
    results = _stage(code, refs, q, DeterministicRandom(b"cheat"), offsets={4: (offset, 0)})
    unchecked = {j: r[: refs.result_length] for j, r in results.items()}
    shifted, decoded = decode_distances(code, unchecked, refs, SPEC)  # the old path
    assert decoded.rejected == ()
    real = {i: dequantize(q[i], code.field, bits=SPEC.bits) for i in range(N)}
    exact = plaintext_distances(real, refs).point
    np.testing.assert_allclose(shifted.point[:, 0], exact[:, 0] + 7.0, rtol=1e-9)
    with pytest.raises(OffsetCheckError) as err:
        decode_distances(code, results, refs, SPEC, checked=refs.participants)
    assert err.value.contributors == (4,)
    assert err.value.code == "offset_check_failed"
    assert err.value.decoded.rejected == ()


@given(
    cheaters=st.sets(st.integers(0, N - 1), min_size=1, max_size=3),
    out=st.integers(1, 2**61 - 2),
    mask=st.integers(0, 2**61 - 2),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=20, deadline=None)
def test_every_cheater_is_named_whatever_its_mask(
    cheaters: set[int], out: int, mask: int, seed: int
) -> None:
    """A cheater that also sets its mask's value at the data point (without knowing the
    challenge) is caught: it passes only if ``mask = -sum_o r_o out`` (probability 1/p)."""
    code, refs, q = _setup(seed % 7)
    results = _stage(
        code, refs, q, DeterministicRandom(seed), offsets={i: (out, mask) for i in cheaters}
    )
    with pytest.raises(OffsetCheckError) as err:
        decode_distances(code, results, refs, SPEC, checked=refs.participants)
    assert set(err.value.contributors) == cheaters


def test_a_cheater_who_knew_the_challenge_would_pass() -> None:
    """Why the challenge must come after the contributions: with the weights known, a
    mask of ``-sum_o r_o delta_o`` cancels the offset (the coordinator draws the challenge
    when sharing closes, every contribution sealed)."""
    code, refs, q = _setup(3)
    weights = challenge_weights(CHALLENGE, code.field.prime, refs.result_length)
    out = 1000
    cancel = int((-out * int(np.sum(weights.astype(object)))) % code.field.prime)
    results = _stage(code, refs, q, DeterministicRandom(b"knew"), offsets={2: (out, cancel)})
    decode_distances(code, results, refs, SPEC, checked=refs.participants)  # passes


def test_error_correction_covers_the_checks() -> None:
    """A recipient whose check values are wrong is corrected like a wrong distance."""
    code, refs, q = _setup(4, n=11)
    results = _stage(code, refs, q, DeterministicRandom(b"wrong"))
    clean, _ = decode_distances(code, results, refs, SPEC, checked=refs.participants)
    results[3] = results[3].copy()
    results[3][-2] = (results[3][-2] + 99) % code.field.prime  # one check value
    got, decoded = decode_distances(code, results, refs, SPEC, checked=refs.participants)
    assert decoded.rejected == (3,)
    assert np.array_equal(got.point, clean.point)


def test_offset_checks_is_the_weighted_sum_plus_the_mask() -> None:
    field = SPEC.field
    rng = np.random.default_rng(5)
    contributions = {i: rng.integers(0, field.prime, 12, dtype=np.int64) for i in (2, 5)}
    weights = rng.integers(0, field.prime, 7, dtype=np.int64)
    got = offset_checks(field, contributions, [5, 2], weights)
    p = field.prime
    want = [
        (
            sum(int(w) * int(v) for w, v in zip(weights, contributions[i][:7], strict=True))
            + int(contributions[i][-1])
        )
        % p
        for i in (5, 2)
    ]
    assert got.tolist() == want
    with pytest.raises(ParameterError, match=r"lacks the zero-sharings of \[3\]"):
        offset_checks(field, contributions, [3], weights)
    with pytest.raises(ParameterError, match="check mask"):
        offset_checks(field, {2: contributions[2][:7]}, [2], weights)
    assert offset_failures(np.array([[0, 3, 0]]), [4, 5, 6]) == (5,)


def test_challenge_weights_known_answer() -> None:
    """Pinned: both sides (and every release) expand a challenge to the same weights."""
    p = SPEC.field.prime
    weights = challenge_weights(CHALLENGE, p, 4)
    assert weights.tolist() == KAT
    assert challenge_weights(CHALLENGE, p, 6)[:4].tolist() == KAT  # a prefix-stable stream
    with pytest.raises(ParameterError, match="32 bytes"):
        challenge_weights(b"short", p, 4)


def test_a_contribution_is_the_bound_plus_its_mask() -> None:
    assert contribution_length(100, 8) == output_bound(100, 8) + 1 == 1629


def test_unchecked_rerandomized_results_are_the_prefix() -> None:
    """The checks only append: the outputs are those of the unchecked path."""
    code, refs, q = _setup(6)
    rng_a = DeterministicRandom(b"same")
    length = contribution_length(N, 2)
    shares = {i: code.share(q[i], rng_a) for i in range(N)}
    contributions = {i: ZeroSharing(code).contribute(length, rng_a) for i in range(N)}
    checked = checked_distances(
        code.field,
        {i: shares[i][0] for i in range(N)},
        {i: contributions[i][0] for i in range(N)},
        refs,
        CHALLENGE,
    )
    plain = rerandomized_distances(
        code.field,
        {i: shares[i][0] for i in range(N)},
        {i: contributions[i][0] for i in range(N)},
        refs,
    )
    assert np.array_equal(checked[: refs.result_length], plain)


KAT = [511824802806616602, 1997510654647641593, 493220155048078857, 2031610365886351361]
"""``challenge_weights(bytes(range(32)), 2**61 - 1, 4)``, recorded when the check was added
(the AES-CTR stream under it is pinned independently in tests/crypto/test_rng.py)."""


@given(
    prime=st.sampled_from([101, 2**31 - 1, 2**59 - 55, 2**61 - 1]),
    n=st.integers(1, 70),
    m=st.sampled_from([1, 2, 17, 8191, 8192, 9000]),
    extremes=st.booleans(),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=25, deadline=None)
def test_sum_and_checks_equal_python_integers(
    prime: int, n: int, m: int, extremes: bool, seed: int
) -> None:
    """The fused pass (32-bit halves, 8-bit weight limbs, float64 blocks of 8,191 outputs)
    against exact Python integers, across blocks, chunks of contributors and field sizes,
    with every value at ``p - 1`` when ``extremes`` (the largest products)."""
    field = PrimeField(prime)
    rng = np.random.default_rng(seed)
    order = list(rng.permutation(n))
    contributions = {
        int(i): rng.integers(0, prime, m + 1 + int(i) % 3, dtype=np.int64) for i in order
    }
    weights = rng.integers(0, prime, m, dtype=np.int64)
    if extremes:
        weights[:] = prime - 1
        for values in contributions.values():
            values[:] = prime - 1
    total, checks = sum_and_checks(field, contributions, [int(i) for i in order], weights)
    w = [int(v) for v in weights]
    want_checks = [
        (
            sum(a * int(b) for a, b in zip(w, contributions[int(i)][:m], strict=True))
            + int(contributions[int(i)][-1])
        )
        % prime
        for i in order
    ]
    want_total = [sum(int(contributions[int(i)][o]) for i in order) % prime for o in range(m)]
    assert checks.tolist() == want_checks
    assert total.tolist() == want_total


def _column_capacity(points: int, threshold: int) -> int:
    """Wrong values one column of ``points`` decodes past: the decoder's
    :attr:`~crypto.reed_solomon.ReedSolomonCode.max_errors` for that code (it depends on the
    number of points and ``R`` only, not on the field or the points' values)."""
    field = PrimeField(2**61 - 1)
    return ReedSolomonCode(field, tuple(range(1, points + 1)), threshold).max_errors


@pytest.mark.parametrize("n", [12, 24, 100, 1000])
def test_check_values_cannot_name_an_inconsistent_sender_at_the_default_sizes(n: int) -> None:
    """docs/protocol.md section 4, "What `rejected` proves": a contributor's check values
    that disagree at more than ``T`` recipients would prove its sharing inconsistent, but one
    column decodes at most ``e = floor((n - R) / 2)`` errors and ``e < T`` at the default
    sizes, so the ``T`` colluding recipients alone can make an honest contributor's column
    undecodable. Naming the sender from the checks would let them frame it."""
    params = CryptoParams.for_federation(n)
    code, colluders = params.clustering_lcc(), params.colluders
    assert _column_capacity(code.n, code.recovery_threshold(2)) < colluders
    honest = ZeroSharing(code).contribute(1, DeterministicRandom(f"framed|{n}"))
    framed = honest.copy()
    framed[:colluders] = (framed[:colluders] + 1) % code.field.prime  # the colluders' values
    assert code.decode({j: honest[j] for j in range(code.n)}, degree=2).rejected == ()
    with pytest.raises(DecodeError):
        code.decode({j: framed[j] for j in range(code.n)}, degree=2)


def test_a_column_corrects_fewer_errors_than_colluders_but_at_n_7_and_11() -> None:
    """The same comparison over every default size N = 3 .. 1,000 (all-to-all codes) and the
    committee of N = 1,000 (``e`` = 47 against its ``T_c`` = 142): only N = 7 and 11 have
    ``e = T`` (1 and 2)."""
    from secfpp.crypto.committee import committee_threshold, plan_committee

    equal = []
    for n in range(3, 1001):
        params = CryptoParams.for_federation(n)
        code = params.clustering_lcc()
        capacity = _column_capacity(code.n, code.recovery_threshold(2))
        assert capacity <= params.colluders, n
        if capacity == params.colluders:
            equal.append((n, capacity))
    assert equal == [(7, 1), (11, 2)]
    plan = plan_committee(1000, collusion_fraction=0.25, dropout_fraction=0.25)
    capacity = _column_capacity(plan.size, plan.clustering_code.threshold(2))
    assert (plan.size, capacity, committee_threshold(plan.size, 0.25)[0]) == (379, 47, 142)
