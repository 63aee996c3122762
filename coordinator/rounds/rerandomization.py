"""Who re-randomizes a round's distances (docs/protocol.md section 4, "Who contributes").

A zero-sharing contribution needs one honest contributor to make the decoded polynomial
uniform off the data point (:mod:`crypto.rerandomize`). Asking every participant for one
costs ``N`` contributions of up to ``N 2 max_clusters`` values to every recipient; asking
``T + 1 + D`` of them (``T`` the colluders among all participants, ``D`` the sharing-stage
dropouts the round tolerates, :func:`crypto.rerandomize.contributors_wanted`) keeps the
guarantee (any ``T + 1`` distinct participants include an honest one, and participants
refuse a request naming fewer) at ``(T + 1 + D) / N`` of the traffic.

Which participants: a different subset each round, so that no participant carries the
extra upload round after round: the ``K`` eligible participants with the smallest
``SHA-256("secfpp-zero-contributors" | round | index)``. The choice is not a secret and needs no
unpredictability: privacy rests on the count recipients check, not on who is asked. It does
not depend on the federation either, so a federation that is re-run (or resumed after a
crash) asks the same participants, and their random draws, hence their stochastic rounding,
repeat.
Participants an earlier offset check named (``distance_excluded``) are never asked.

A committee round asks fewer: a sample drawn from its roster with its beacon, as the
committee is (:mod:`crypto.contributor_sample`; 47 instead of 500 at ``N = 1,000``), which
participants recompute and check; the guarantee is then the committee's ``2**-40`` bound.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from secfpp.crypto.contributor_sample import Sample, plan_for, round_sample
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.rerandomize import contributor_floor, contributors_wanted, dropouts_of

__all__ = ["designate", "dropouts_of", "minimum_contributors", "sharing_dropouts"]


def sharing_dropouts(params: CryptoParams, n: int) -> int:
    """``D = ceil(n f)``: contributors that may miss the sharing stage, ``f`` the fraction of
    code points the distance stage tolerates missing (``clustering_dropouts / code_points``,
    the federation's dropout fraction as its codes realize it)."""
    return dropouts_of(n, params.clustering_dropouts, params.code_points)


def designate(
    params: CryptoParams,
    number: int,
    participants: Sequence[int],
    excluded: Sequence[int] = (),
    *,
    federation_id: str | None = None,
    beacon: str | None = None,
) -> list[int]:
    """The participants round ``number`` asks for a zero-sharing contribution, sorted.

    A committee round (``federation_id`` and the round's ``beacon``, hex, given;
    ``participants`` its roster) asks its drawn sample
    (:func:`crypto.contributor_sample.round_sample`) less ``excluded``, where the sample is
    smaller than the any-subset rule's. Otherwise
    :func:`~crypto.rerandomize.contributors_wanted` of the ``participants`` not in
    ``excluded``, ranked by ``SHA-256("secfpp-zero-contributors" | round | index)``: every
    eligible participant when there are at most ``T + 1 + D`` of them (small federations,
    where the subset would save nothing).
    """
    out = set(excluded)
    sample = _sample(params, number, participants, federation_id, beacon)
    if sample is not None:
        return [i for i in sample.members if i not in out]
    eligible = [int(i) for i in participants if int(i) not in out]
    k = contributors_wanted(
        len(eligible), params.colluders_among_participants, sharing_dropouts(params, len(eligible))
    )
    if k >= len(eligible):
        return sorted(eligible)

    def rank(index: int) -> bytes:
        return hashlib.sha256(f"secfpp-zero-contributors|{number}|{index}".encode()).digest()

    return sorted(sorted(eligible, key=rank)[:k])


def minimum_contributors(params: CryptoParams, roster: int | None = None) -> int:
    """The fewest contributors a distance request may name: the floor of a committee round's
    drawn sample (``roster`` its size, :func:`crypto.contributor_sample.plan_for`) where
    it has one, else ``T + 1`` (:func:`crypto.rerandomize.contributor_floor`)."""
    plan = None if roster is None else plan_for(params, roster)
    return contributor_floor(params.colluders_among_participants) if plan is None else plan.floor


def _sample(
    params: CryptoParams,
    number: int,
    roster: Sequence[int],
    federation_id: str | None,
    beacon: str | None,
) -> Sample | None:
    if federation_id is None or beacon is None:
        return None
    return round_sample(
        params,
        federation_id=federation_id,
        round_number=number,
        roster=sorted(int(i) for i in roster),
        beacon=bytes.fromhex(beacon),
    )
