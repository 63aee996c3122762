"""What a participant refuses to compute (DESIGN.md section 6), as pure checks.

A curious coordinator could single out one participant's update or prompt by asking for
overlapping sums and differencing them. Before computing a coded result a participant
checks, for that stage of that round:

* aggregation: the member sets are pairwise disjoint and each has at least
  ``min_aggregation_size`` members;
* distances: the cluster sets are pairwise disjoint; there is at most one singleton
  candidate per cluster, and it is a member of that cluster;
* every member named delivered a share the participant could authenticate;
* it has not already answered a *different* request for the same stage
  (:func:`request_digest` of the request is stored and compared).

Each violation raises :class:`RefusalError` with a stable ``reason``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Sequence
from typing import Any

from crypto.errors import RefusalError
from crypto.secpc import ReferenceSets

__all__ = [
    "check_aggregation_request",
    "check_distance_request",
    "check_same_request",
    "request_digest",
]


def _check_disjoint(sets: Sequence[Sequence[int]]) -> None:
    seen: set[int] = set()
    for members in sets:
        if len(set(members)) != len(members):
            raise RefusalError("overlapping_sets", "a member set names a participant twice")
        if seen & set(members):
            raise RefusalError(
                "overlapping_sets", f"participants {sorted(seen & set(members))} are in two sets"
            )
        seen |= set(members)


def _check_shares(members: Collection[int], have_shares_from: Collection[int]) -> None:
    missing = sorted(set(members) - set(have_shares_from))
    if missing:
        raise RefusalError("missing_share", f"no authenticated share from participants {missing}")


def check_aggregation_request(
    member_sets: Sequence[Sequence[int]],
    *,
    min_size: int,
    have_shares_from: Collection[int],
) -> None:
    """Refuse unless the aggregation request is safe to answer (module docstring)."""
    if not member_sets:
        raise RefusalError("empty_request", "no member set to sum over")
    _check_disjoint(member_sets)
    for members in member_sets:
        if len(members) < min_size:
            raise RefusalError(
                "set_too_small",
                f"a member set has {len(members)} members, fewer than the minimum {min_size}",
            )
        _check_shares(members, have_shares_from)


def check_distance_request(refs: ReferenceSets, *, have_shares_from: Collection[int]) -> None:
    """Refuse unless the distance request is safe to answer (module docstring)."""
    _check_disjoint([m for _, m in refs.clusters])
    clusters = dict(refs.clusters)
    seen: set[int] = set()
    for c, k in refs.candidates:
        if c in seen:
            raise RefusalError("duplicate_candidate", f"cluster {c} has two candidates")
        seen.add(c)
        if k not in clusters.get(c, ()):
            raise RefusalError("candidate_not_member", f"candidate {k} is not in cluster {c}")
    _check_shares(refs.participants, have_shares_from)


def request_digest(request: Any) -> str:
    """SHA-256 of the canonical JSON of a request (sorted keys, no whitespace)."""
    blob = json.dumps(request, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(blob.encode()).hexdigest()


def check_same_request(previous: str | None, digest: str) -> None:
    """Refuse if a different request for the same stage was already answered."""
    if previous is not None and previous != digest:
        raise RefusalError(
            "conflicting_request", "a different request for this stage was already answered"
        )
