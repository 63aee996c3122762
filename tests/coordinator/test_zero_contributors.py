"""Who re-randomizes (docs/protocol.md section 4, "Who contributes";
``coordinator.rounds.rerandomization``): a round asks ``T + 1 + D`` participants for a
zero-sharing, a different subset each round, never one an offset check convicted; the
distance request names those that shared, and a round where fewer than ``T + 1`` shared has
no distance stage (participants would refuse it, ``too_few_contributors``). A committee
round asks the sample drawn with its beacon instead, and needs its floor."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from secfpp.coordinator.rounds.machine import Stage
from secfpp.coordinator.rounds.protocol import close_sharing
from secfpp.coordinator.rounds.rerandomization import (
    designate,
    minimum_contributors,
    sharing_dropouts,
)
from secfpp.coordinator.rounds.state import RoundState
from secfpp.coordinator.rounds.views import envelope_specs
from secfpp.crypto.clustering import Membership
from secfpp.crypto.contributor_sample import Sample, round_sample
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.rerandomize import contributors_wanted
from secfpp.federation import FederationConfig, FederationCreate
from tests.support.coordinator import federation_request

N = 24
BEACON = bytes(range(7, 39))


def _config(n: int = N) -> FederationConfig:
    """The tests' federation (T = n / 8, dropout fraction 0.375) with ``n`` participants."""
    return FederationCreate.model_validate(federation_request(n_participants=n)).resolve()


def _state(config: FederationConfig, number: int = 1, excluded: list[int] | None = None) -> Any:
    members = list(range(config.n_participants))
    return RoundState(
        membership=Membership.initial(members).to_dict(),
        generation=0,
        clustering=True,
        participants=members,
        distance_excluded=excluded or [],
        zero_contributors=designate(config.crypto_params(), number, members, excluded or []),
    )


def test_a_round_asks_t_plus_one_plus_d_and_rotates() -> None:
    params = _config().crypto_params()
    t, d = params.colluders_among_participants, sharing_dropouts(params, N)
    assert (t, d) == (3, 9)  # collusion 1/8 of 24; the distance stage tolerates 9 of 24
    rounds = [designate(params, r, range(N)) for r in range(1, 9)]
    assert {len(c) for c in rounds} == {t + 1 + d}
    assert all(c == sorted(c) for c in rounds)
    assert len({tuple(c) for c in rounds}) == 8  # a different subset each round
    # spread: over 40 rounds nobody is asked every time and everybody in at least a fifth
    many = [designate(params, r, range(N)) for r in range(1, 41)]
    counts = [sum(i in c for c in many) for i in range(N)]
    assert max(counts) < 40
    assert min(counts) >= 8
    assert designate(params, 3, range(N)) == rounds[2]  # deterministic
    assert designate(params, 3, range(N)) != designate(params, 4, range(N))


def test_convicted_participants_are_never_asked() -> None:
    params = _config().crypto_params()
    for r in range(1, 20):
        assert not {3, 5} & set(designate(params, r, range(N), excluded=[3, 5]))


def test_small_federations_ask_everybody() -> None:
    config = _config(8)
    params = config.crypto_params()
    everyone = designate(params, 1, range(4))
    assert everyone == [0, 1, 2, 3]


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(min_value=3, max_value=400),
    collusion=st.sampled_from([0.0, 0.1, 0.25]),
    number=st.integers(min_value=1, max_value=10**6),
)
def test_enough_contributors_remain_after_the_tolerated_dropouts(
    n: int, collusion: float, number: int
) -> None:
    params = CryptoParams.for_federation(n, collusion_fraction=collusion)
    chosen = designate(params, number, range(n))
    drop = sharing_dropouts(params, n)
    assert set(chosen) <= set(range(n))
    assert len(chosen) - drop >= minimum_contributors(params) or len(chosen) == n


def test_only_the_named_share_a_zero_sharing() -> None:
    config = _config()
    state = _state(config)
    named = set(state.zero_contributors)
    for i in range(N):
        kinds = [s.kind for s in envelope_specs(config, state, i)]
        assert ("zero" in kinds) == (i in named)


def test_the_request_names_the_contributors_that_shared() -> None:
    config = _config()
    state = _state(config)
    named = list(state.zero_contributors)
    gone = set(named[:3])  # three of them drop out in the sharing stage
    out = close_sharing(state, config, set(range(N)) - gone, gone, salt="ab" * 32)
    assert out.stage is Stage.DISTANCES
    refs = out.state.refs_obj()
    assert refs is not None
    assert refs.contributors == tuple(i for i in named if i not in gone)
    assert out.state.distance_checks() == list(refs.contributors)  # one check each


def test_fewer_than_t_plus_one_contributors_mean_no_distance_stage() -> None:
    config = _config()
    state = _state(config)
    named = list(state.zero_contributors)
    floor = minimum_contributors(config.crypto_params())
    gone = set(named[: len(named) - floor + 1])  # floor - 1 contributors left
    out = close_sharing(state, config, set(range(N)) - gone, gone, salt="ab" * 32)
    assert out.state.clustering is False
    assert out.state.refs is None
    assert out.stage is Stage.AGGREGATION  # the round still aggregates
    gone = set(named[: len(named) - floor])  # exactly T + 1 left: enough
    out = close_sharing(state, config, set(range(N)) - gone, gone, salt="ab" * 32)
    assert out.stage is Stage.DISTANCES


def test_a_convicted_participant_is_no_contributor_of_the_request() -> None:
    config = _config()
    state = _state(config, excluded=[0, 1])
    out = close_sharing(state, config, set(range(N)), set(), salt="ab" * 32)
    refs = out.state.refs_obj()
    assert refs is not None
    assert refs.contributors is not None
    assert not {0, 1} & set(refs.contributors)


def _committee_state(n: int, gone: int = 0) -> tuple[FederationConfig, Any, Sample]:
    """A committee round of ``n`` (automatic committee) whose contributors are its drawn
    sample (crypto/contributor_sample.py)."""
    config = FederationCreate(name="f", n_participants=n).resolve()
    params = config.crypto_params()
    roster = list(range(n))
    committee = list(range(params.code_points))  # who the members are does not matter here
    sample = round_sample(params, federation_id="fed", round_number=4, roster=roster, beacon=BEACON)
    assert sample is not None
    state = RoundState(
        membership=Membership.initial(roster).to_dict(),
        generation=0,
        clustering=True,
        participants=roster,
        committee=committee,
        beacon=BEACON.hex(),
        zero_contributors=designate(
            params, 4, roster, [], federation_id="fed", beacon=BEACON.hex()
        ),
    )
    return config, state, sample


def test_a_committee_round_asks_its_drawn_sample_less_the_convicted() -> None:
    """N = 300 (committee of 187): 40 drawn instead of T + 1 + D = 150; a convicted
    participant in the sample is not asked; the floor a request needs is 30, not 76."""
    config, state, sample = _committee_state(300)
    params = config.crypto_params()
    assert state.zero_contributors == list(sample.members)
    assert (sample.plan.size, sample.plan.floor) == (40, 30)
    assert contributors_wanted(300, 75, sharing_dropouts(params, 300)) == 150
    convicted = sample.members[0]
    assert designate(
        params, 4, list(range(300)), [convicted], federation_id="fed", beacon=BEACON.hex()
    ) == list(sample.members[1:])
    assert minimum_contributors(params, 300) == 30
    assert minimum_contributors(params) == 76  # T + 1 without a roster
    # the same roster and beacon in an all-to-all federation: the any-subset rule
    plain = _config(300).crypto_params()
    assert not plain.has_committee
    assert len(designate(plain, 4, list(range(300)), federation_id="fed", beacon="ab" * 16)) > 40


def test_a_committee_round_needs_the_samples_floor_to_have_distances() -> None:
    config, state, sample = _committee_state(300)
    named = list(sample.members)
    everybody = set(range(300))
    gone = set(named[:11])  # 29 of the sample left: fewer than its floor of 30
    out = close_sharing(state, config, everybody - gone, gone, salt="ab" * 32)
    assert out.state.refs is None
    assert out.stage is Stage.AGGREGATION
    gone = set(named[:10])  # 30 left: the request names them
    out = close_sharing(state, config, everybody - gone, gone, salt="ab" * 32)
    assert out.stage is Stage.DISTANCES
    refs = out.state.refs_obj()
    assert refs is not None
    assert refs.contributors == tuple(named[10:])
