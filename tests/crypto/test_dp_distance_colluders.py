"""Distance-stage DP noise against ``T`` colluding contributors (issue 26, docs/protocol.md
section 9).

The attack: the coordinator, with ``T`` colluding participants, asks a noisy distance request
whose present participants are only the ``m_min`` members of one reference set plus nobody
else, or a set the colluders make up most of. The colluders know their own noise shares and
subtract them from the decoded values; what remains is the noise of the honest contributors
alone. The ledger records every distance release with ``shares = m_min`` honest shares, so
fewer than ``m_min`` honest contributors would overspend silently.

The defence: participants refuse a noisy request naming fewer than ``T + m_min`` present
participants (``too_few_contributors``); the coordinator runs no distance stage then; a
federation of fewer than ``T + m_min`` participants cannot turn the noise on.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from secfpp.crypto.dp.distance import (
    DistanceNoise,
    noisy_contributor_floor,
    with_distance_noise_headroom,
)
from secfpp.crypto.errors import ParameterError, RefusalError
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.refusal import check_distance_request
from secfpp.crypto.rng import DeterministicRandom
from secfpp.crypto.secpc import ReferenceSets


def _params(n: int, collusion: float = 0.25) -> CryptoParams:
    base = CryptoParams.for_federation(n, collusion_fraction=collusion, dropout_fraction=0.25)
    return with_distance_noise_headroom(base, noise_multiplier=1.0, l2_clip=1.0)


def test_the_floor_is_colluders_plus_the_smallest_reference_set() -> None:
    params = _params(12)
    assert params.colluders == 3
    assert noisy_contributor_floor(params) == 3 + 3


def test_a_noisy_request_with_too_few_contributors_is_refused() -> None:
    """Three present participants, one cluster of three: on the old code this was answered,
    and with ``T = 3`` colluders among 12 every noise share in it could be theirs."""
    params = _params(12)
    floor = noisy_contributor_floor(params)
    refs = ReferenceSets(participants=(0, 1, 2), clusters=((0, (0, 1, 2)),), probes=())
    with pytest.raises(RefusalError) as caught:
        check_distance_request(
            refs, have_shares_from=range(12), min_reference_size=3, min_contributors=floor
        )
    assert caught.value.reason == "too_few_contributors"
    # without noise the same request is a valid one (the floor is the noise's alone)
    check_distance_request(refs, have_shares_from=range(12), min_reference_size=3)


@pytest.mark.slow  # above 1.5 s: out of the inner loop (bash dev.sh quick)
def test_colluders_subtracting_their_noise_leave_the_ledgers_honest_shares() -> None:
    """Play it: every contributor draws its share; the ``T`` colluders subtract theirs from the
    decoded sum. In any request participants answer, the rest is a sum of at least
    ``m_min`` = the ledger's ``shares`` honest discrete Gaussians, and its variance is at least
    the variance the ledger assumes."""
    params = _params(12)
    noise = DistanceNoise.for_params(params, noise_multiplier=1.0, l2_clip=1.0)
    floor = noisy_contributor_floor(params)
    present = tuple(range(floor))  # the smallest request participants answer
    refs = ReferenceSets(participants=present, clusters=((0, present),), probes=())
    check_distance_request(
        refs, have_shares_from=present, min_reference_size=3, min_contributors=floor
    )
    record = noise.record(federation_id="f", round=1, refs=refs)
    colluders = set(present[: params.colluders])
    rng = DeterministicRandom(7)
    length, trials = refs.result_length, 400
    residual = np.zeros((trials, length), dtype=np.float64)
    for t in range(trials):
        for i in present:
            share = noise.share(length, rng=rng)
            if i not in colluders:  # the colluders' own shares are known and subtracted
                residual[t] += share
    honest = len(present) - len(colluders)
    assert honest >= record.shares
    assumed = record.shares * record.sigma**2
    # sample variance of a sum of `honest` shares; the ledger assumes `shares` of them
    assert residual.var() >= 0.8 * assumed


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(min_value=6, max_value=64),
    collusion=st.sampled_from([0.1, 0.2, 0.25, 0.3]),
    data=st.data(),
)
def test_every_answered_noisy_request_keeps_the_recorded_honest_shares(
    n: int, collusion: float, data: st.DataObject
) -> None:
    params = CryptoParams.for_federation(n, collusion_fraction=collusion, dropout_fraction=0.0)
    floor = noisy_contributor_floor(params)
    present = sorted(data.draw(st.sets(st.integers(0, n - 1), min_size=3, max_size=n)))
    refs = ReferenceSets(participants=tuple(present), clusters=((0, tuple(present)),), probes=())
    if len(present) < floor:
        with pytest.raises(RefusalError) as caught:
            check_distance_request(
                refs, have_shares_from=present, min_reference_size=3, min_contributors=floor
            )
        assert caught.value.reason == "too_few_contributors"
        return
    check_distance_request(
        refs, have_shares_from=present, min_reference_size=3, min_contributors=floor
    )
    # whichever T of them collude, at least m_min = 3 honest contributors remain
    assert len(present) - params.colluders >= 3


def test_a_federation_too_small_for_its_colluders_cannot_turn_the_noise_on() -> None:
    small = CryptoParams.for_federation(3, collusion_fraction=0.25, dropout_fraction=0.0)
    assert small.colluders == 1
    assert noisy_contributor_floor(small) == 4
    with pytest.raises(ParameterError, match=r"dp\.distance_noise_multiplier.*T \+ 3 = 4"):
        DistanceNoise.for_params(small, noise_multiplier=1.0, l2_clip=1.0)


def test_with_a_committee_the_floor_counts_every_participants_colluders() -> None:
    params = CryptoParams.for_federation(1000, committee=True)
    assert params.has_committee
    assert params.colluders == 142  # the committee's T_c
    assert noisy_contributor_floor(params) == 250 + 3  # T = floor(0.25 * 1000) participants
