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
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence

from secfpp.crypto.params import CryptoParams
from secfpp.crypto.rerandomize import contributor_floor, contributors_wanted

__all__ = ["designate", "dropouts_of", "minimum_contributors", "sharing_dropouts"]


def sharing_dropouts(params: CryptoParams, n: int) -> int:
    """``D = ceil(n f)``: contributors that may miss the sharing stage, ``f`` the fraction of
    code points the distance stage tolerates missing (``clustering_dropouts / code_points``,
    the federation's dropout fraction as its codes realize it)."""
    return dropouts_of(n, params.clustering_dropouts, params.code_points)


def dropouts_of(n: int, missing: int, points: int) -> int:
    """``ceil(n missing / points)``: :func:`sharing_dropouts` from a code's own figures (the
    distance stage may lose ``missing`` of its ``points``)."""
    return math.ceil(n * missing / points)


def designate(
    params: CryptoParams,
    number: int,
    participants: Sequence[int],
    excluded: Sequence[int] = (),
) -> list[int]:
    """The participants round ``number`` asks for a zero-sharing contribution, sorted:
    :func:`~crypto.rerandomize.contributors_wanted` of the ``participants`` not in
    ``excluded``, ranked by ``SHA-256("secfpp-zero-contributors" | round | index)``.

    Every eligible participant when there are at most ``T + 1 + D`` of them (small
    federations, where the subset would save nothing).
    """
    out = set(excluded)
    eligible = [int(i) for i in participants if int(i) not in out]
    k = contributors_wanted(
        len(eligible), params.colluders_among_participants, sharing_dropouts(params, len(eligible))
    )
    if k >= len(eligible):
        return sorted(eligible)

    def rank(index: int) -> bytes:
        return hashlib.sha256(f"secfpp-zero-contributors|{number}|{index}".encode()).digest()

    return sorted(sorted(eligible, key=rank)[:k])


def minimum_contributors(params: CryptoParams) -> int:
    """``T + 1``: the fewest contributors a distance request may name
    (:func:`crypto.rerandomize.contributor_floor`)."""
    return contributor_floor(params.colluders_among_participants)
