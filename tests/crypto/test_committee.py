"""Committee sharing (crypto.committee): size from the exact hypergeometric tail, the public
draw (known answers from an independent generator, uniformity), verification by
participants, and the committee's codes on real shares."""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import random
from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from secfpp.crypto.aggregation import member_sums
from secfpp.crypto.committee import (
    CommitteeMismatchError,
    beacon_commitment,
    check_announced_committee,
    committee_size,
    committee_threshold,
    draw_committee,
    draw_seed,
    plan_committee,
    round_committee,
    tail_probability,
    verify_committee,
)
from secfpp.crypto.errors import DecodeError, ParameterError, RefusalError
from secfpp.crypto.lcc import LagrangeCode
from secfpp.crypto.params import CodeSpec, CryptoParams
from secfpp.crypto.quantize import lift, quantize
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.secpc import (
    ReferenceSets,
    coded_distances,
    decode_distances,
    plaintext_distances,
)

VECTORS = json.loads((Path(__file__).parent / "kat" / "committee_vectors.json").read_text())[
    "committee_draw"
]
BEACON = hashlib.sha256(b"test beacon").digest()


# -- tail bound ----------------------------------------------------------------------
@pytest.mark.parametrize(("n", "f", "c"), [(12, 4, 5), (10, 3, 10), (9, 0, 4), (8, 8, 3)])
def test_tail_probability_equals_brute_force_enumeration(n: int, f: int, c: int) -> None:
    colluders = set(range(f))
    counts = Counter(len(colluders & set(s)) for s in itertools.combinations(range(n), c))
    total = math.comb(n, c)
    for t in range(c + 1):
        brute = Fraction(sum(v for x, v in counts.items() if x > t), total)
        assert tail_probability(n, f, c, t) == brute, (n, f, c, t)


def test_tail_probability_agrees_with_scipy_at_the_default_committee() -> None:
    exact = tail_probability(1000, 250, 379, 142)
    assert float(exact) == pytest.approx(stats.hypergeom.sf(142, 1000, 250, 379), rel=1e-6)
    assert exact < Fraction(1, 2**40) < tail_probability(1000, 250, 378, 141)


def test_tail_probability_refuses_bad_arguments() -> None:
    with pytest.raises(ParameterError, match="'colluders'"):
        tail_probability(10, 11, 3, 1)
    with pytest.raises(ParameterError, match="'size'"):
        tail_probability(10, 2, 11, 1)
    with pytest.raises(ParameterError, match="'t'"):
        tail_probability(10, 2, 3, -1)


# -- size ----------------------------------------------------------------------------
@pytest.mark.parametrize("n", [2, 50, 128])
def test_everybody_is_a_member_up_to_128(n: int) -> None:
    assert committee_size(n) == n
    if n >= 3:
        assert plan_committee(n).full


def test_committee_size_is_the_smallest_safe_size_from_64() -> None:
    n, f = 1000, 250
    c = committee_size(n)
    assert c == 379
    t, d = committee_threshold(c, 0.25)
    assert (t, d) == (142, 94)
    assert tail_probability(n, f, c, t) * 2**40 < 1
    for smaller in range(64, c):
        assert tail_probability(n, f, smaller, committee_threshold(smaller, 0.25)[0]) * 2**40 >= 1


@pytest.mark.parametrize(
    ("n", "fc", "fd", "expected"),
    [(1000, 0.1, 0.25, 81), (1000, 0.25, 0.1, 203), (1000, 0.05, 0.25, 64), (500, 0.4, 0.1, 441)],
)
def test_committee_size_follows_the_fractions(n: int, fc: float, fd: float, expected: int) -> None:
    c = committee_size(n, collusion_fraction=fc, dropout_fraction=fd)
    assert c == expected
    plan = plan_committee(n, collusion_fraction=fc, dropout_fraction=fd)
    assert plan.size == c
    if c < n:
        assert plan.failure * 2**40 < 1
        assert plan.failure > 0
    else:  # no committee below N is safe: everybody, with today's thresholds
        assert plan.full


def test_no_safe_committee_and_no_all_to_all_code_is_refused() -> None:
    assert committee_size(130, collusion_fraction=0.45) == 130  # no c < N is safe
    with pytest.raises(ParameterError, match=r"'dropout_fraction'.*largest safe"):
        # and for_federation refuses N = 130 with 58 colluders and 32 dropouts
        plan_committee(130, collusion_fraction=0.45, dropout_fraction=0.25)


@pytest.mark.parametrize("c", range(64, 420, 7))
def test_committee_codes_keep_majority_thresholds(c: int) -> None:
    t, d = committee_threshold(c, 0.25)
    assert d == math.floor(0.25 * c)
    assert 2 * t + 1 <= c - d < 2 * t + 3  # the largest T that fits the distance stage
    assert 2 * (2 * t + 1) - t > c  # equivocation with T colluding members (2R - T > c)
    assert 2 * (c - d) - t > c


@pytest.mark.parametrize("n", [10, 100, 128])
def test_full_plan_uses_for_federation_codes(n: int) -> None:
    params = CryptoParams.for_federation(n)
    plan = plan_committee(n)
    assert plan.clustering_code == params.clustering_code
    assert plan.aggregation_code == params.aggregation_code
    assert plan.failure == 0
    assert plan.envelopes_per_stage == n * (n - 1)


def test_plan_refuses_an_unsafe_size_naming_the_safe_one() -> None:
    with pytest.raises(ParameterError, match=r"'size'.*smallest safe size is 379"):
        plan_committee(1000, size=200)
    plan = plan_committee(1000, size=500)  # larger than needed is fine
    assert plan.size == 500
    assert plan.failure * 2**40 < 1
    assert plan.envelopes_per_stage == 1000 * 500 - 500


def test_for_federation_uses_the_committee_codes_when_asked() -> None:
    plain = CryptoParams.for_federation(1000)
    withc = CryptoParams.for_federation(1000, committee=True)
    plan = plan_committee(1000)
    assert plain.committee_size is None
    assert not plain.has_committee
    assert withc.committee_size == 379
    assert withc.has_committee
    assert withc.code_points == 379
    assert (withc.clustering_code, withc.aggregation_code) == (
        plan.clustering_code,
        plan.aggregation_code,
    )
    assert withc.clustering_lcc().n == withc.aggregation_lcc().n == 379
    assert withc.aggregation_dropouts == plan.dropouts == 94
    # quantization stays that of N = 1000 summands
    assert withc.aggregation_field == plain.aggregation_field
    assert withc.clustering_field == plain.clustering_field
    small = CryptoParams.for_federation(100, committee=True)  # N <= 128: everybody
    assert small.committee_size == 100
    assert not small.has_committee
    assert small.aggregation_code == CryptoParams.for_federation(100).aggregation_code
    forced = CryptoParams.for_federation(12, collusion_fraction=0.2, committee=7)
    assert (forced.code_points, forced.clustering_code.t, forced.aggregation_code.k) == (7, 2, 4)
    with pytest.raises(ParameterError, match=r"'size'.*smallest safe size is 12"):
        CryptoParams.for_federation(12, collusion_fraction=0.25, committee=7)
    with pytest.raises(ParameterError, match="'committee_size'"):
        CryptoParams.for_federation(10, committee_size=11)
    with pytest.raises(ParameterError, match="'committee_size'"):
        CryptoParams.for_federation(10, committee=2)


def test_committee_params_check_thresholds_against_the_committee() -> None:
    """A committee code whose threshold has 2R - T <= c is refused, naming c."""
    base = CryptoParams.for_federation(12, collusion_fraction=0.2, committee=7)
    with pytest.raises(ParameterError, match=r"2R - T > c \(committee_size\)"):
        dataclasses.replace(base, aggregation_code=CodeSpec(k=2, t=2))  # 2*4 - 2 = 6 <= 7
    with pytest.raises(ParameterError, match=r"needs c \(committee_size\) >= "):
        dataclasses.replace(base, aggregation_code=CodeSpec(k=6, t=2))  # R = 8 > 7


# -- draw ----------------------------------------------------------------------------
@pytest.mark.parametrize("case", VECTORS, ids=lambda v: f"{v['federation_id']}-{v['round']}")
def test_draw_matches_known_answer_vectors(case: dict) -> None:
    beacon = bytes.fromhex(case["beacon"])
    args = (case["federation_id"], case["round"], case["members"], beacon, case["size"])
    assert draw_seed(*args).hex() == case["seed"]
    assert list(draw_committee(*args)) == case["committee"]


def test_draw_binds_every_input_and_ignores_roster_order() -> None:
    members = list(range(0, 400, 2))
    base = draw_committee("fed", 3, members, BEACON, 64)
    shuffled = members[:]
    random.Random(1).shuffle(shuffled)
    assert draw_committee("fed", 3, shuffled, BEACON, 64) == base
    variants = [
        draw_committee("fed2", 3, members, BEACON, 64),
        draw_committee("fed", 4, members, BEACON, 64),
        draw_committee("fed", 3, members, hashlib.sha256(b"other").digest(), 64),
        draw_committee("fed", 3, [*members, 1001], BEACON, 64),
        draw_committee("fed", 3, members, BEACON, 65),
    ]
    assert all(v != base for v in variants)


@given(
    members=st.sets(st.integers(0, 2**64 - 1), min_size=1, max_size=60),
    data=st.data(),
    beacon=st.binary(min_size=16, max_size=40),
)
def test_draw_is_a_sorted_subset_of_the_requested_size(
    members: set[int], data: st.DataObject, beacon: bytes
) -> None:
    size = data.draw(st.integers(1, len(members)))
    committee = draw_committee("fed", 1, list(members), beacon, size)
    assert len(committee) == size == len(set(committee))
    assert list(committee) == sorted(committee)
    assert set(committee) <= members


def test_draw_is_uniform_over_subsets() -> None:
    """Every 3-subset of 8 members equally likely: chi-square over the 56 subsets."""
    members = [10, 11, 12, 13, 14, 15, 16, 17]
    draws = 5600
    counts = Counter(
        draw_committee("fed", r, members, hashlib.sha256(b"u%d" % r).digest(), 3)
        for r in range(draws)
    )
    assert len(counts) == math.comb(8, 3)
    observed = [counts[s] for s in itertools.combinations(members, 3)]
    assert stats.chisquare(observed).pvalue > 1e-3


def test_draw_includes_every_member_equally_often() -> None:
    """Inclusion counts of 50 members in committees of 10 (expected 0.2 per draw)."""
    members = list(range(50))
    draws = 2000
    counts = Counter(
        m
        for r in range(draws)
        for m in draw_committee("fed", 9, members, hashlib.sha256(b"i%d" % r).digest(), 10)
    )
    observed = [counts[m] for m in members]
    assert sum(observed) == 10 * draws
    assert stats.chisquare(observed).pvalue > 1e-3


def test_draw_refuses_bad_inputs() -> None:
    with pytest.raises(ParameterError, match="'beacon'"):
        draw_committee("fed", 1, [1, 2, 3], b"short", 2)
    with pytest.raises(ParameterError, match="'members'"):
        draw_committee("fed", 1, [1, 2, 2], BEACON, 2)
    with pytest.raises(ParameterError, match="'size'"):
        draw_committee("fed", 1, [1, 2, 3], BEACON, 4)
    with pytest.raises(ParameterError, match="'round_number'"):
        draw_committee("fed", -1, [1, 2, 3], BEACON, 2)


# -- verify --------------------------------------------------------------------------
def _context() -> dict:
    return {
        "federation_id": "fed",
        "round_number": 12,
        "members": list(range(1000)),
        "beacon": BEACON,
        "size": 379,
    }


def test_verify_accepts_the_public_draw_in_any_order() -> None:
    ctx = _context()
    drawn = draw_committee(ctx["federation_id"], 12, ctx["members"], BEACON, 379)
    assert verify_committee(list(reversed(drawn)), **ctx) == drawn


def _tampered() -> list[tuple[str, list[int], dict]]:
    ctx = _context()
    drawn = list(draw_committee("fed", 12, ctx["members"], BEACON, 379))
    outsider = next(m for m in ctx["members"] if m not in drawn)
    swapped = [*drawn[1:], outsider]
    return [
        ("one member swapped for an outsider", swapped, ctx),
        ("one member dropped", drawn[:-1], ctx),
        ("a member repeated", [*drawn[:-1], drawn[0]], ctx),
        ("an extra member", [*drawn, outsider], ctx),
        ("drawn with another beacon", drawn, {**ctx, "beacon": hashlib.sha256(b"x").digest()}),
        ("drawn for another round", drawn, {**ctx, "round_number": 13}),
        ("drawn from another roster", drawn, {**ctx, "members": list(range(1, 1001))}),
    ]


@pytest.mark.parametrize(("label", "committee", "ctx"), _tampered(), ids=lambda v: str(v)[:30])
def test_verify_refuses_a_committee_that_is_not_the_draw(
    label: str, committee: list[int], ctx: dict
) -> None:
    with pytest.raises(CommitteeMismatchError, match="not the public draw") as info:
        verify_committee(committee, **ctx)
    assert isinstance(info.value, RefusalError)
    assert info.value.reason == "committee_mismatch"
    assert info.value.code == "committee_mismatch"


# -- the committee's codes on real shares --------------------------------------------
def test_committee_aggregation_decodes_the_exact_sum_despite_dropouts() -> None:
    """N = 200 share to the c = 134 committee; D of them drop; the sum of all N is exact."""
    n, length = 200, 300
    plan = plan_committee(n)
    assert (plan.size, plan.t, plan.dropouts) == (134, 50, 33)
    spec = CryptoParams.for_federation(n).aggregation_field  # bits safe for N summands
    code = LagrangeCode(spec.field, plan.aggregation_code.k, plan.t, plan.size)
    rng = DeterministicRandom(b"committee-agg")
    q = np.random.default_rng(0).integers(-spec.quantum_bound(), spec.quantum_bound(), (n, length))
    shares = [code.share(spec.field.asarray(q[i]), rng) for i in range(n)]
    alive = range(plan.dropouts, plan.size)  # the first D committee members dropped
    results = {
        j: member_sums(spec.field, {i: shares[i][j] for i in range(n)}, [tuple(range(n))])[0]
        for j in alive
    }
    decoded = code.decode(results, degree=1)
    total = lift(decoded.values.reshape(-1)[:length], spec.field)
    assert np.array_equal(total, q.sum(axis=0))
    with pytest.raises(DecodeError, match="need"):
        code.decode(dict(list(results.items())[1:]), degree=1)  # one more dropout: too few


def test_committee_distance_stage_matches_plaintext() -> None:
    """Coded squared distances over N = 200 participants computed by the committee only."""
    n, r = 200, 8
    plan = plan_committee(n)
    spec = CryptoParams.for_federation(n, reduced_dim=r).clustering_field
    code = LagrangeCode(spec.field, 1, plan.clustering_code.t, plan.size)
    rng = DeterministicRandom(b"committee-dist")
    vectors = np.random.default_rng(1).normal(0, 0.5, (n, r))
    shares = [
        code.share(quantize(v, spec.field, bits=spec.bits, clip=spec.clip), rng) for v in vectors
    ]
    refs = ReferenceSets(
        participants=tuple(range(n)),
        clusters=((0, tuple(range(0, 100))), (1, tuple(range(100, 200)))),
        probes=((0, tuple(range(0, 50))),),
    )
    alive = range(plan.dropouts, plan.size)
    results = {
        j: coded_distances(spec.field, {i: shares[i][j] for i in range(n)}, refs) for j in alive
    }
    coded, _ = decode_distances(code, results, refs, spec)
    clipped = np.clip(vectors, -spec.clip, spec.clip)
    quantized = np.round(clipped * spec.scale) / spec.scale
    plain = plaintext_distances(quantized, refs)
    np.testing.assert_allclose(coded.point, plain.point, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(coded.centre, plain.centre, rtol=1e-9, atol=1e-9)


def test_beacon_commitment_known_answer_and_binding() -> None:
    beacon = bytes(range(32))
    # SHA-256("secfpp-beacon-commitment|v1" || u32 5 || "fed-1" || u64 3 || u32 32 || beacon)
    expected = "0b8d9bd4b27f3e3f740461d29011116f65f71d3a4c3e3712f03e7a1f88063cd6"
    assert beacon_commitment("fed-1", 3, beacon).hex() == expected
    variants = {
        beacon_commitment("fed-2", 3, beacon),
        beacon_commitment("fed-1", 4, beacon),
        beacon_commitment("fed-1", 3, beacon[:-1] + b"\x00"),
        beacon_commitment("fed-1", 3, beacon + b"\x00"),
    }
    assert len(variants) == 4
    assert bytes.fromhex(expected) not in variants
    with pytest.raises(ParameterError):
        beacon_commitment("fed-1", 3, bytes(15))
    with pytest.raises(ParameterError):
        beacon_commitment("fed-1", -1, beacon)


def test_the_announced_beacon_must_open_the_recorded_commitment() -> None:
    roster, beacon = list(range(40)), bytes(range(32))
    members = round_committee("fed", 2, roster, beacon, 9)
    check = dict(
        federation_id="fed",
        round_number=2,
        me=0,
        committee_size=9,
        announced_size=9,
        roster=roster,
        beacon=beacon,
        members=members,
        recipients=None,
        enrolled=set(roster),
    )
    assert check_announced_committee(**check) == members  # no commitment recorded
    good = beacon_commitment("fed", 2, beacon)
    assert check_announced_committee(**check, commitment=good) == members
    for wrong in (beacon_commitment("fed", 3, beacon), bytes(32), good[:16]):
        with pytest.raises(CommitteeMismatchError, match="does not open the commitment"):
            check_announced_committee(**check, commitment=wrong)


def test_equivocation_bound_grows_or_refuses_committees_above_a_third_dropouts() -> None:
    """2R - T > c holds for committee codes up to f_d of about 1/3 (docs/scale.md): at
    f_d = 0.35 no committee below N = 1000 is safe, so the plan is all-to-all (main drew 607
    members, whose thresholds two groups sharing only colluders could both reach); at
    N = 10,000 all-to-all overflows as well and the refusal names dropout_fraction."""
    assert committee_size(1000, dropout_fraction=0.33) == 553  # unchanged from main
    assert plan_committee(1000, dropout_fraction=0.35).full
    with pytest.raises(ParameterError, match=r"'dropout_fraction'.*no committee of 64 to 9999"):
        plan_committee(10000, collusion_fraction=0.1, dropout_fraction=0.35)
    with pytest.raises(ParameterError, match=r"largest safe dropout_fraction is 0/5 "):
        committee_threshold(5, 0.25)  # T = 1, R_c = 3: 2*3 - 1 = 5 <= c
    assert committee_threshold(5, None) == (2, 0)
