"""Which reference sets a distance request may name (docs/protocol.md, section 6).

A distance request reveals ``D[i, S] = |x_i - mu_S|^2`` for every present participant
``i`` and reference set ``S``. Each value is linear in the Gram matrix ``G = X X^T`` of
the participants' reduced prompts:

    m_S^2 D[i, S] = m_S^2 G_ii - 2 m_S sum_{k in S} G_ik + sum_{k, l in S} G_kl,

so a coordinator free to name sets could difference them: with ``S = {a, b}``,
``4 D[a, S] = |x_a - x_b|^2`` exactly. Three rules, all checked by every participant from
what it holds before it computes anything, bound that freedom:

1. **Floor.** No reference set (cluster, probe, or what a probe leaves of its cluster)
   has fewer than :data:`REFERENCE_FLOOR` = 3 members, whatever the federation's
   ``min_reference_size`` says (:func:`effective_minimum`).
2. **Beacon probes.** The probe of a cluster is not the coordinator's choice: it is
   :func:`crypto.clustering.initial_probe` of the cluster's present members salted with
   the round's beacon (:func:`probe_salt`), a value committed one round ahead
   (:mod:`coordinator.rounds.beacons`); :func:`check_beacon_probes` recomputes it.
3. **Membership change.** Between two consecutive rounds the clusters may change by one
   split of one cluster into two, or by the merge of two clusters, or not at all
   (:func:`check_membership_change`). Both requests are compared on the participants
   they both place in a cluster (the present-member restriction: absent members are
   left out of a request, so only the common ones can be compared). Every participant's
   task shows the same request (the request digest binds it), so each honest
   participant present in both rounds checks the same change.

What the rules do not bound (docs/protocol.md, section 7): which subset of a cluster a
split creates (the cut is computed from decoded distances the participants never see)
and returning members (a participant absent last round may reappear in any cluster).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from secfpp.crypto.clustering import initial_probe
from secfpp.crypto.errors import RefusalError
from secfpp.crypto.secpc import ReferenceSets

__all__ = [
    "REFERENCE_FLOOR",
    "AnsweredSets",
    "check_beacon_probes",
    "check_membership_change",
    "effective_minimum",
    "probe_salt",
]

REFERENCE_FLOOR = 3
"""No participant computes a distance to a set of fewer members: a centre of two
members gives ``|x_a - x_b|^2 = 4 D[a, {a, b}]``, an individual distance."""


def effective_minimum(min_reference_size: int) -> int:
    """The smallest reference set a participant accepts: the federation's setting, but
    never below :data:`REFERENCE_FLOOR`."""
    return max(int(min_reference_size), REFERENCE_FLOOR)


def probe_salt(federation_id: str, round_number: int, beacon: bytes) -> str:
    """The public salt of round ``round_number``'s probes: a hash of the round's beacon.

    The probe of cluster ``c`` is ``initial_probe(present members of c, salt=f"{salt}|{c}")``.
    """
    digest = hashlib.sha256(
        b"secfpp-probes|" + federation_id.encode() + b"|" + str(round_number).encode() + b"|"
    )
    digest.update(beacon)
    return digest.hexdigest()


def check_beacon_probes(
    refs: ReferenceSets,
    *,
    federation_id: str,
    round_number: int,
    beacon: bytes,
    min_reference_size: int,
) -> None:
    """Refuse (``probe_not_drawn``) a probe other than the beacon's draw for its cluster."""
    salt = probe_salt(federation_id, round_number, beacon)
    clusters = dict(refs.clusters)
    for c, probe in refs.probes:
        drawn = initial_probe(
            clusters.get(c, ()),
            min_reference_size=effective_minimum(min_reference_size),
            salt=f"{salt}|{c}",
        )
        if tuple(probe) != drawn:
            raise RefusalError(
                "probe_not_drawn",
                f"the probe of cluster {c} is not the one the round's beacon draws",
            )


@dataclass(frozen=True)
class AnsweredSets:
    """What a participant answered in a distance stage, kept for the next round's check.

    Attributes:
        round: the round number.
        clusters: cluster id -> members named in that request (present members only).
    """

    round: int
    clusters: Mapping[int, tuple[int, ...]]

    @classmethod
    def of(cls, round_number: int, refs: ReferenceSets) -> AnsweredSets:
        return cls(round_number, dict(refs.clusters))

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {"round": self.round, "clusters": [[c, list(m)] for c, m in self.clusters.items()]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> AnsweredSets:
        """Inverse of :meth:`to_dict`; raises ``KeyError``/``TypeError``/``ValueError``."""
        return cls(
            int(data["round"]),
            {int(c): tuple(int(m) for m in members) for c, members in data["clusters"]},
        )


def _restricted(
    clusters: Mapping[int, tuple[int, ...]], common: set[int]
) -> dict[int, frozenset[int]]:
    out = {c: frozenset(m) & common for c, m in clusters.items()}
    return {c: m for c, m in out.items() if m}


def _describe(change: str, ids: list[int]) -> str:
    return f"{change} (clusters {ids})"


def check_membership_change(
    previous: AnsweredSets | None, refs: ReferenceSets, round_number: int
) -> None:
    """Refuse (``membership_change``) clusters that do not follow from the previous round's.

    ``previous`` is the request this participant answered last. The rule is checked only
    when that was round ``round_number - 1``: a participant that did not answer the
    previous round (first clustering round, absent, warm-up just ended) checks the floor
    and the probes only (module docstring). On the participants both requests place in a
    cluster, the current clusters must equal the previous ones, or differ by exactly one
    of: cluster ``c`` split into ``c`` and a new id; clusters ``a`` and ``b`` merged
    into ``a`` (``b`` gone). Cluster ids are compared, so a relabelling is a change too.
    """
    if previous is None or previous.round != round_number - 1:
        return
    common = {m for ms in previous.clusters.values() for m in ms} & {
        m for _, ms in refs.clusters for m in ms
    }
    before = _restricted(previous.clusters, common)
    after = _restricted(dict(refs.clusters), common)
    changed = sorted(c for c in set(before) | set(after) if before.get(c) != after.get(c))
    if not changed:
        return
    if len(changed) == 2:
        a, b = changed
        # split: one id keeps part of its members, the other id is new and holds the rest
        for parent, child in ((a, b), (b, a)):
            if (
                parent in before
                and child not in before
                and child in after
                and after.get(parent, frozenset()) | after[child] == before[parent]
            ):
                return
        # merge: both existed, one absorbed the other
        for kept, gone in ((a, b), (b, a)):
            if (
                kept in before
                and gone in before
                and gone not in after
                and after.get(kept) == before[kept] | before[gone]
            ):
                return
    raise RefusalError(
        "membership_change",
        _describe(
            "the clusters changed by more than one split or merge since the previous round",
            changed,
        ),
    )
