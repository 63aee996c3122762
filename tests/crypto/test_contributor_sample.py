"""Zero-sharing contributors drawn from a committee round's beacon (crypto/contributor_sample.py,
docs/protocol.md section 4, "Who contributes").

The sample's size is the smallest that keeps an honest contributor among the names a request
must carry, with the committee's ``2**-40`` bound (known answers, minimality and the bound
itself, exactly); the draw is the committee's under its own domain (uniform over subsets,
independent of the committee); and a recipient refuses a request that names fewer than the
sample's floor or anybody outside the sample, unless it names ``T + 1``.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import struct
from collections import Counter
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from secfpp.crypto.committee import (
    SECURITY_BITS,
    below_bound,
    draw_committee,
    draw_seed,
    plan_committee,
    population_colluders,
    shuffle_draw,
    tail_probability,
)
from secfpp.crypto.contributor_sample import (
    SAMPLE_DOMAIN,
    Sample,
    SamplePlan,
    check_named,
    draw_contributors,
    round_sample,
    sample_plan,
)
from secfpp.crypto.errors import ParameterError, RefusalError
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.refusal import check_zero_contributors
from secfpp.crypto.rerandomize import contributors_wanted, dropouts_of
from secfpp.crypto.secpc import ReferenceSets

BEACON = bytes(range(32))
N = 1000


def _committee_params(n: int = N) -> CryptoParams:
    return CryptoParams.for_federation(n, committee=True)


def test_n_1000_asks_47_instead_of_500() -> None:
    params = _committee_params()
    plan = plan_committee(N, collusion_fraction=0.25, dropout_fraction=0.25)
    colluders = population_colluders(N, 0.25)
    missing = plan.size - plan.clustering_code.threshold(2)
    assert (plan.size, colluders, missing) == (379, 250, 94)
    assert (params.clustering_dropouts, params.code_points) == (94, 379)
    assert contributors_wanted(N, colluders, dropouts_of(N, missing, plan.size)) == 500
    assert sample_plan(N, colluders, missing, plan.size) == SamplePlan(size=47, dropouts=12)
    assert SamplePlan(size=47, dropouts=12).floor == 35


@pytest.mark.parametrize(
    ("roster", "colluders", "missing", "points"),
    [
        (1000, 250, 94, 379),
        (496, 124, 65, 262),
        (129, 32, 21, 86),
        (12, 2, 2, 7),
        (300, 30, 40, 150),
    ],
)
def test_the_size_is_the_smallest_within_the_bound(
    roster: int, colluders: int, missing: int, points: int
) -> None:
    """The bound holds at the chosen size, exactly (integer hypergeometric tail), and at no
    smaller size; the chosen size is below the any-subset rule's ``T + 1 + D``."""
    plan = sample_plan(roster, colluders, missing, points)
    assert plan is not None
    assert plan.dropouts == math.ceil(plan.size * missing / points)
    assert below_bound(tail_probability(roster, colluders, plan.size, plan.floor - 1))
    for smaller in range(1, plan.size):
        t = smaller - dropouts_of(smaller, missing, points) - 1
        assert t < 0 or not below_bound(tail_probability(roster, colluders, smaller, t))
    assert plan.size < contributors_wanted(roster, colluders, dropouts_of(roster, missing, points))


def test_no_sample_where_it_saves_nothing() -> None:
    assert sample_plan(6, 1, 1, 6) is None  # T + 1 + D = 3 of 6 already
    assert sample_plan(3, 1, 0, 3) is None
    assert (
        round_sample(
            CryptoParams.for_federation(100),
            federation_id="f",
            round_number=1,
            roster=[1, 2],
            beacon=BEACON,
        )
        is None
    )  # all-to-all: no roster is announced, any T + 1


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ParameterError, match="roster"):
        sample_plan(0, 1, 0, 3)
    with pytest.raises(ParameterError, match="missing"):
        sample_plan(10, 2, 3, 3)
    with pytest.raises(ParameterError, match="colluders"):
        sample_plan(10, -1, 0, 3)


def test_the_draw_is_public_sorted_and_not_the_committee() -> None:
    roster = list(range(3, N + 3))
    plan = SamplePlan(size=47, dropouts=12)
    sample = draw_contributors("fed", 7, roster, BEACON, plan)
    assert sample == draw_contributors("fed", 7, list(reversed(roster)), BEACON, plan)
    assert list(sample) == sorted(set(sample))
    assert len(sample) == 47
    assert set(sample) <= set(roster)
    assert sample != draw_committee("fed", 7, roster, BEACON, 47)  # another domain
    seed = draw_seed("fed", 7, roster, BEACON, 47, domain=SAMPLE_DOMAIN)
    assert seed != draw_seed("fed", 7, roster, BEACON, 47)
    assert sample == shuffle_draw(seed, roster, 47)
    assert sample != draw_contributors("fed", 8, roster, BEACON, plan)
    assert sample != draw_contributors("fed", 7, roster, BEACON[::-1], plan)


def _draw_from_the_spec(
    fid: str, round_number: int, roster: list[int], beacon: bytes, s: int
) -> list[int]:
    """docs/protocol.md section 11, "The draw", with the contributors' domain, written from the
    text alone (no project code)."""
    members = sorted(roster)
    seed = hashlib.sha256(
        b"secfpp-zero-contributors|v1"
        + struct.pack("<I", len(fid.encode()))
        + fid.encode()
        + struct.pack("<QII", round_number, s, len(members))
        + b"".join(struct.pack("<Q", m) for m in members)
        + struct.pack("<I", len(beacon))
        + beacon
    ).digest()
    words = (
        w
        for k in itertools.count()
        for w in struct.unpack("<4Q", hashlib.sha256(seed + struct.pack("<Q", k)).digest())
    )
    for i in range(s):
        m = len(members) - i
        w = next(words)
        while w >= 2**64 - (2**64 % m):
            w = next(words)
        j = i + w % m
        members[i], members[j] = members[j], members[i]
    return sorted(members[:s])


@pytest.mark.parametrize(("n", "s", "round_number"), [(1000, 47, 1), (129, 32, 12), (12, 5, 3)])
def test_the_draw_is_the_one_protocol_md_specifies(n: int, s: int, round_number: int) -> None:
    roster = [3 * i + 1 for i in range(n)]
    plan = SamplePlan(size=s, dropouts=1)
    expected = _draw_from_the_spec("fed-Ω", round_number, roster, BEACON, s)
    assert list(draw_contributors("fed-Ω", round_number, roster, BEACON, plan)) == expected


def test_every_subset_is_equally_likely() -> None:
    """2 of 5 over 2,000 beacons: the 10 pairs are drawn uniformly (chi-square, 9 degrees of
    freedom, statistic below 27.9: p = 0.001)."""
    plan = SamplePlan(size=2, dropouts=0)
    counts = Counter(
        draw_contributors("fed", 1, [0, 1, 2, 3, 4], i.to_bytes(16, "little"), plan)
        for i in range(2000)
    )
    assert set(counts) == set(itertools.combinations(range(5), 2))
    expected = 2000 / 10
    assert sum((c - expected) ** 2 / expected for c in counts.values()) < 27.9


def _refs(named: list[int]) -> ReferenceSets:
    members = tuple(range(12))
    return ReferenceSets(members, ((0, members),), contributors=tuple(sorted(named)))


def _sample() -> Sample:
    params = _committee_params()
    sample = round_sample(
        params, federation_id="fed", round_number=3, roster=list(range(N)), beacon=BEACON
    )
    assert sample is not None
    assert sample.plan == SamplePlan(size=47, dropouts=12)
    return sample


def test_recipients_accept_the_floor_of_the_sample() -> None:
    sample = _sample()
    named = list(sample.members[:35])
    check_zero_contributors(
        _refs(named), have_contributions_from=named, colluders=250, sample=sample
    )


def test_a_coordinator_naming_its_own_choice_below_t_plus_one_is_refused() -> None:
    """The attack the sample rule must stop: 35 names (enough for the sample) of which one,
    or all, were not drawn, e.g. the coordinator's colluders. Without the sample they are
    refused as fewer than T + 1 = 251; with it, as not drawn."""
    sample = _sample()
    outside = [i for i in range(N) if i not in sample.members]
    for named in (list(sample.members[:34]) + outside[:1], outside[:35], outside[:250]):
        with pytest.raises(RefusalError, match="not in the round's drawn sample") as err:
            check_zero_contributors(
                _refs(named), have_contributions_from=named, colluders=250, sample=sample
            )
        assert err.value.reason == "too_few_contributors"
        with pytest.raises(RefusalError, match=r"fewer than the 251 \(T \+ 1\)"):
            check_zero_contributors(_refs(named), have_contributions_from=named, colluders=250)


def test_fewer_than_the_floor_is_refused_and_t_plus_one_always_accepted() -> None:
    sample = _sample()
    named = list(sample.members[:34])
    with pytest.raises(RefusalError, match="fewer than the 35") as err:
        check_zero_contributors(
            _refs(named), have_contributions_from=named, colluders=250, sample=sample
        )
    assert err.value.reason == "too_few_contributors"
    anyone = list(range(251))  # any T + 1: one of them is honest whoever they are
    check_zero_contributors(
        _refs(anyone), have_contributions_from=anyone, colluders=250, sample=sample
    )


@given(
    roster=st.integers(min_value=150, max_value=1024),
    fraction=st.sampled_from([0.1, 0.2, 0.25, 0.3]),
)
def test_a_named_set_the_rule_accepts_holds_an_honest_member_but_with_tiny_probability(
    roster: int, fraction: float
) -> None:
    """Whatever the coordinator names within the rule (at least ``floor`` of the sample),
    it is all colluders only if the sample holds ``floor`` or more of them: probability
    below ``2**-40`` by the exact tail, for every roster size and collusion fraction."""
    params = CryptoParams.for_federation(roster, committee=True, collusion_fraction=fraction)
    f = params.colluders_among_participants
    plan = sample_plan(roster, f, params.clustering_dropouts, params.code_points)
    if plan is None:
        return
    p_all_colluders = tail_probability(roster, min(f, roster), plan.size, plan.floor - 1)
    assert p_all_colluders * 2**SECURITY_BITS < 1
    assert p_all_colluders < Fraction(1, 2**SECURITY_BITS)
    with pytest.raises(RefusalError):
        check_named(range(plan.floor - 1), sample=range(plan.size), plan=plan)
    check_named(range(plan.floor), sample=range(plan.size), plan=plan)


def test_the_availability_figures_protocol_md_quotes() -> None:
    """docs/protocol.md section 4 ("drawn contributors", what it gives up) and section 9:
    the chance that withholding colluders leave a sample of 47 below its floor of 35 (13 or
    more of them in it), against the committee's own exposure and the any-subset rule's."""
    assert float(tail_probability(N, 250, 47, 12)) == pytest.approx(0.39, abs=0.005)
    assert float(tail_probability(N, 100, 47, 12)) == pytest.approx(0.0004, abs=0.00005)
    assert float(tail_probability(N, 250, 379, 94)) == pytest.approx(0.51, abs=0.005)
    assert float(tail_probability(N, 250, 500, 249)) < 1e-93
