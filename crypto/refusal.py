"""What a participant refuses to compute (DESIGN.md section 6), as pure checks.

A curious coordinator could single out one participant's update or prompt by asking for
overlapping sums and differencing them. Before computing a coded result a participant
checks, for that stage of that round:

* aggregation: the member sets are pairwise disjoint and each has at least
  ``min_aggregation_size`` members;
* distances: the cluster sets are pairwise disjoint and each has at least
  ``min_reference_size`` members; there is at most one probe per cluster, a proper subset
  of it, and both the probe and what it leaves of its cluster have at least
  ``min_reference_size`` members (the centre of the rest is a known combination of the
  other two, so it is a reference set too), and never fewer than
  :data:`crypto.refset_rules.REFERENCE_FLOOR` = 3 whatever the federation says: a
  centre of two gives ``4 D[a, {a, b}] = |x_a - x_b|^2``, one of one a prompt
  (docs/protocol.md, "Refusal rules"); which sets a request may name at all is
  :mod:`crypto.refset_rules`;
* with distance-stage DP noise, the request names at least ``min_contributors`` present
  participants (:func:`crypto.dp.distance.noisy_contributor_floor`: ``T`` + the smallest
  reference set), so that the noise shares the ledger counts stay honest even when ``T``
  colluding contributors subtract their own;
* every member named delivered a share the participant could authenticate;
* re-randomized distances (:func:`check_zero_contributors`): every contributor whose
  zero-sharing the request asks it to add delivered one, and a request that names its
  contributors names at least ``T + 1`` (:func:`crypto.rerandomize.contributor_floor`) or,
  in a committee round, at least the floor of the round's drawn sample and only sampled
  participants (:mod:`crypto.contributor_sample`), so one of them is honest; a noisy
  request names none (every present participant carries noise);
* it has not already answered a *different* request for the same stage
  (:func:`request_digest` of the request is stored and compared).

Each violation raises :class:`RefusalError` with a stable ``reason``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping, Sequence
from typing import Any

from secfpp.crypto.contributor_sample import Sample, check_named
from secfpp.crypto.errors import RefusalError
from secfpp.crypto.refset_rules import effective_minimum
from secfpp.crypto.rerandomize import contributor_floor
from secfpp.crypto.secpc import ReferenceSets

__all__ = [
    "aggregation_request_digest",
    "check_aggregation_request",
    "check_distance_request",
    "check_same_request",
    "check_zero_contributors",
    "distance_request_digest",
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


def check_distance_request(
    refs: ReferenceSets,
    *,
    have_shares_from: Collection[int],
    min_reference_size: int,
    min_contributors: int = 0,
) -> None:
    """Refuse unless the distance request is safe to answer (module docstring);
    ``min_reference_size`` below :data:`~crypto.refset_rules.REFERENCE_FLOOR` is raised
    to it. ``min_contributors`` (0 without distance noise): the fewest present participants
    (the contributors of the noise) a noisy request may name."""
    min_reference_size = effective_minimum(min_reference_size)
    if len(refs.participants) < min_contributors:
        raise RefusalError(
            "too_few_contributors",
            f"the noisy distance request names {len(refs.participants)} present participants, "
            f"fewer than the {min_contributors} the federation's distance noise needs to stay "
            "private against its colluders",
        )
    _check_disjoint([m for _, m in refs.clusters])
    clusters = dict(refs.clusters)
    for c, members in refs.clusters:
        if len(members) < min_reference_size:
            raise RefusalError(
                "set_too_small",
                f"cluster {c} has {len(members)} members, fewer than the minimum "
                f"{min_reference_size} for a reference set",
            )
    seen: set[int] = set()
    for c, probe in refs.probes:
        if c in seen:
            raise RefusalError("duplicate_probe", f"cluster {c} has two probes")
        seen.add(c)
        members = clusters.get(c, ())
        if not set(probe) < set(members):
            raise RefusalError(
                "probe_not_subset", f"the probe of cluster {c} is not a proper subset of it"
            )
        if min(len(probe), len(members) - len(probe)) < min_reference_size:
            raise RefusalError(
                "set_too_small",
                f"the probe of cluster {c} splits it {len(probe)} / "
                f"{len(members) - len(probe)}, below the minimum {min_reference_size}",
            )
    _check_shares(refs.participants, have_shares_from)


def check_zero_contributors(
    refs: ReferenceSets,
    *,
    have_contributions_from: Collection[int],
    colluders: int,
    noisy: bool = False,
    sample: Sample | None = None,
) -> None:
    """Refuse a re-randomized distance request this participant cannot answer safely.

    ``colluders``: ``T`` among all participants (a committee's ``T_c`` bounds its members
    only, contributors are participants). A request with named ``contributors`` must
    name at least ``T + 1`` or, in a committee round with a contributor ``sample``
    (:func:`crypto.contributor_sample.round_sample`), at least its floor, all drawn
    (:func:`crypto.contributor_sample.check_named`): either way one of them is honest
    (``too_few_contributors``); and none with distance-stage noise
    (``noisy``: the noise every present participant adds must all be in the results); every
    contributor's zero-sharing must have opened (``missing_share``)."""
    named = refs.contributors
    if named is not None and noisy:
        raise RefusalError(
            "too_few_contributors",
            "the noisy distance request names its contributors: with distance-stage noise "
            "every present participant contributes its noise share",
        )
    floor = contributor_floor(colluders)
    if named is not None and len(named) < floor:
        if sample is None:
            raise RefusalError(
                "too_few_contributors",
                f"the distance request names {len(named)} zero-sharing contributors, fewer "
                f"than the {floor} (T + 1) that make one of them honest",
            )
        check_named(named, sample=sample.members, plan=sample.plan)
    missing = sorted(set(refs.zero_contributors) - set(have_contributions_from))
    if missing:
        raise RefusalError(
            "missing_share", f"no authenticated zero-sharing from participants {missing}"
        )


def request_digest(request: Any) -> str:
    """SHA-256 of the canonical JSON of a request (sorted keys, no whitespace).

    Both sides compute it from the request's *meaning* (:func:`distance_request_digest`,
    :func:`aggregation_request_digest`): the participant stores the digest of the request
    it answered and sends it with its result; the coordinator accepts a result only with
    the digest of the request it holds, so results of two different requests for one
    stage are never decoded together (docs/protocol.md, "Equivocation")."""
    blob = json.dumps(request, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(blob.encode()).hexdigest()


def check_same_request(previous: str | None, digest: str) -> None:
    """Refuse if a different request for the same stage was already answered."""
    if previous is not None and previous != digest:
        raise RefusalError(
            "conflicting_request", "a different request for this stage was already answered"
        )


def _with_committee(request: dict[str, Any], committee: Mapping[str, Any] | None) -> Any:
    """A committee round's request also binds roster, beacon and committee
    (:func:`crypto.committee.committee_binding`); an all-to-all request is unchanged."""
    return request if committee is None else {**request, "committee": dict(committee)}


def distance_request_digest(
    federation_id: str,
    round_number: int,
    refs: ReferenceSets,
    *,
    committee: Mapping[str, Any] | None = None,
    challenge: str | None = None,
) -> str:
    """:func:`request_digest` of a distance request (and of its committee, if any).

    ``challenge``: the request's offset-check challenge (hex, :mod:`crypto.rerandomize`),
    bound when present so that every recipient attests the same one.
    """
    request: dict[str, Any] = {
        "federation": federation_id,
        "round": round_number,
        "stage": "distances",
        "participants": list(refs.participants),
        "clusters": [[c, list(m)] for c, m in refs.clusters],
        "probes": [[c, list(m)] for c, m in refs.probes],
    }
    if refs.contributors is not None:  # absent from an earlier release's requests
        request["contributors"] = list(refs.contributors)
    if challenge is not None:
        request["challenge"] = challenge
    return request_digest(_with_committee(request, committee))


def aggregation_request_digest(
    federation_id: str,
    round_number: int,
    member_sets: Sequence[Sequence[int]],
    *,
    committee: Mapping[str, Any] | None = None,
) -> str:
    """:func:`request_digest` of an aggregation request (its member sets, in order, and
    its committee, if any)."""
    return request_digest(
        _with_committee(
            {
                "federation": federation_id,
                "round": round_number,
                "stage": "aggregation",
                "sets": [list(m) for m in member_sets],
            },
            committee,
        )
    )
