"""A round's zero-sharing contributions are sized by the round's own bound.

``coordinator.rounds.views.zero_sharing_length`` asks for ``n 2C + C (C - 1) / 2`` outputs and
the offset check's mask, ``n`` the round's participants and ``C`` the clusters it starts with.
The property below is what makes that safe: whoever shares or drops, and whatever probe the
beacon draws, the round's distance request (:meth:`Membership.reference_sets`, as
``close_sharing`` builds it) never has more outputs than that, so participants, which refuse a
request their contributions do not cover, never refuse an honest coordinator's request.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from secfpp.coordinator.rounds.state import RoundState
from secfpp.coordinator.rounds.views import envelope_specs, zero_sharing_length
from secfpp.crypto.clustering import Membership
from secfpp.crypto.rerandomize import contribution_length
from secfpp.federation import FederationConfig, FederationCreate


def _config(n: int, max_clusters: int = 8) -> FederationConfig:
    body: dict[str, Any] = {
        "name": "zero-length",
        "strategy": "secfpp",
        "n_participants": n,
        "prompt": {"n_ctx": 2},
        "tolerance": {"max_clusters": max_clusters, "rerandomize_distances": True},
    }
    return FederationCreate.model_validate(body).resolve()


@st.composite
def _rounds(draw: st.DrawFn) -> tuple[Membership, list[int], list[int], str]:
    n = draw(st.integers(6, 40))
    roster = sorted(draw(st.sets(st.integers(0, n - 1), min_size=3, max_size=n)))
    labels = draw(st.lists(st.integers(0, 7), min_size=len(roster), max_size=len(roster)))
    groups: dict[int, list[int]] = {}
    for member, label in zip(roster, labels, strict=True):
        groups.setdefault(label, []).append(member)
    membership = Membership(tuple((c, tuple(m)) for c, m in sorted(groups.items())), next_id=8)
    present = sorted(draw(st.sets(st.sampled_from(roster), max_size=len(roster))))
    salt = draw(st.text("0123456789abcdef", min_size=8, max_size=8))
    return membership, roster, present, salt


@settings(deadline=None)
@given(_rounds(), st.integers(1, 3), st.integers(2, 4))
def test_no_request_of_the_round_has_more_outputs_than_its_contributions_cover(
    drawn: tuple[Membership, list[int], list[int], str], min_agg: int, min_ref: int
) -> None:
    membership, roster, present, salt = drawn
    refs = membership.reference_sets(
        present, min_aggregation_size=min_agg, min_reference_size=min_ref, salt=salt
    )
    clusters = len(membership.clusters)
    bound = contribution_length(len(roster), clusters) - 1  # the mask is the last entry
    if refs is not None:
        assert refs.result_length <= bound
        assert len(refs.participants) <= len(roster)


def _state(membership: Membership, participants: list[int]) -> RoundState:
    return RoundState(
        membership=membership.to_dict(),
        generation=0,
        clustering=True,
        participants=participants,
    )


def test_a_round_of_one_cluster_asks_for_an_eighth_of_the_federations_bound() -> None:
    n = 100
    config = _config(n)
    one = _state(Membership(((0, tuple(range(n))),)), list(range(n)))
    assert zero_sharing_length(config, one) == 2 * n + 1  # 200 outputs and the mask
    federation = contribution_length(n, 8)
    assert federation == 16 * n + 28 + 1
    four = _state(
        Membership(tuple((c, tuple(range(25 * c, 25 * c + 25))) for c in range(4)), next_id=4),
        list(range(n)),
    )
    assert zero_sharing_length(config, four) == n * 8 + 6 + 1
    fewer = _state(Membership(((0, tuple(range(60))),)), list(range(60)))  # 60 on the roster
    assert zero_sharing_length(config, fewer) == 2 * 60 + 1
    specs = {s.kind: s for s in envelope_specs(config, one)}
    assert specs["zero"].vector_length == specs["zero-seed"].vector_length == 2 * n + 1
    assert specs["zero"].share_length == 2 * n + 1


def test_the_round_bound_never_exceeds_the_federations() -> None:
    config = _config(12, max_clusters=2)
    many = _state(
        Membership(tuple((c, (3 * c, 3 * c + 1, 3 * c + 2)) for c in range(4)), next_id=4),
        list(range(12)),
    )
    assert zero_sharing_length(config, many) == contribution_length(12, 2)
