"""The round-start bound on the distance release (:func:`distance_sensitivity_bound`,
:meth:`DistanceNoise.planned_record`) is at least every request the round can make."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from secfpp.crypto.dp.distance import (
    DistanceNoise,
    distance_sensitivity,
    distance_sensitivity_bound,
)
from secfpp.crypto.secpc import ReferenceSets

NOISE = DistanceNoise(
    noise_multiplier=1.0, l2_clip=1.0, bits=8, reduced_dim=16, min_reference=3, min_contributors=3
)


@st.composite
def rounds(draw: st.DrawFn) -> tuple[list[int], list[list[int]], ReferenceSets]:
    """A membership of 1-4 clusters of >= 3 over up to 18 participants, and a request it
    allows: each asked cluster's present members (>= 3, the refusal floor), some with a
    proper-subset probe; clusters with too few present are not asked."""
    k = draw(st.integers(1, 4))
    sizes = [draw(st.integers(3, 6)) for _ in range(k)]
    order = draw(st.permutations(range(sum(sizes))))
    clusters, at = [], 0
    for size in sizes:
        clusters.append(sorted(order[at : at + size]))
        at += size
    asked, probes, present = [], [], set()
    for cid, members in enumerate(clusters):
        here = sorted(draw(st.sets(st.sampled_from(members), max_size=len(members))))
        if len(here) < 3:
            continue
        present |= set(here)
        asked.append((cid, tuple(here)))
        if draw(st.booleans()):
            size = draw(st.integers(1, len(here) - 1))
            probes.append((cid, tuple(sorted(draw(st.permutations(here))[:size]))))
    if not asked:
        asked.append((0, tuple(clusters[0])))
        present |= set(clusters[0])
    refs = ReferenceSets(
        participants=tuple(sorted(present)), clusters=tuple(asked), probes=tuple(probes)
    )
    return list(range(sum(sizes))), clusters, refs


@given(rounds())
def test_the_bound_covers_every_request(
    case: tuple[list[int], list[list[int]], ReferenceSets],
) -> None:
    participants, clusters, refs = case
    radius = NOISE.radius
    assert distance_sensitivity(refs, radius) <= distance_sensitivity_bound(
        participants, clusters, radius
    )
    planned = NOISE.planned_record(
        federation_id="f", round=1, participants=participants, clusters=clusters
    )
    actual = NOISE.record(federation_id="f", round=1, refs=refs)
    assert actual.dimension <= planned.dimension
    assert actual.rho <= planned.rho


def test_the_bound_is_tight_for_the_full_request() -> None:
    clusters = [[0, 1, 2, 3], [4, 5, 6, 7]]
    refs = ReferenceSets(
        participants=tuple(range(8)),
        clusters=((0, (0, 1, 2, 3)), (1, (4, 5, 6, 7))),
    )
    one = distance_sensitivity(refs, NOISE.radius)
    bound = distance_sensitivity_bound(range(8), clusters, NOISE.radius)
    assert one < bound <= 2**0.5 * one * 1.0000001  # each cluster counted twice
