"""The SecPC clustering step (DESIGN.md section 4, step 4): pure and deterministic.

:class:`Membership` is the cluster state everybody trains under in a round: clusters
(id -> members) and the candidates (cluster id -> participant farthest from the centre
in the previous round) that the next distance stage tests for a split.

:func:`secpc_step` maps decoded :class:`~crypto.secpc.Distances` (``D``: squared
point-to-reference-set distances, ``E``: squared centre-centre distances) and the current
membership to the next membership:

1. assign every participant to its nearest cluster centre, ``a(i) = argmin_c D[i, c]``
   (ties: lowest cluster id);
2. **split** (at most one per cluster, never beyond ``max_clusters``): for a cluster
   ``c`` with candidate ``k``, ``A = {i : a(i) = c, i != k}``,
   ``S0 = sum_A D[i, c]``, ``S1 = sum_A min(D[i, c], D[i, {k}])``; if
   ``S1 < split_ratio * S0`` and ``{k}`` plus the members of ``A`` closer to ``k`` than to
   the centre number at least ``min_aggregation_size``, they form a new cluster;
3. **merge** (at most one per round): among clusters not split this round, the closest
   pair with ``E[c, c'] < merge_factor * (s_c + s_c') / 2``, ``s_c = median{D[i, c] :
   a(i) = c}``, is merged into the lower id;
4. empty clusters disappear; the next candidates are, for every cluster that neither
   split off nor merged this round, the member farthest from its centre in this ``D``
   (ties: lowest participant id). New and merged clusters get candidates one round later,
   like the first clustering round.

Participants absent from ``D`` (they did not share this round) keep their cluster (and
follow it if it merges).
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from crypto.errors import ParameterError
from crypto.secpc import Distances, ReferenceSets

__all__ = [
    "ClusteringConfig",
    "Membership",
    "Merge",
    "Split",
    "StepResult",
    "inherit_prompts",
    "secpc_step",
]


@dataclass(frozen=True)
class ClusteringConfig:
    """Factors of the clustering step (defaults as DESIGN.md section 4)."""

    split_ratio: float = 0.9
    merge_factor: float = 1.0
    min_aggregation_size: int = 3
    max_clusters: int = 8

    def __post_init__(self) -> None:
        if not 0 < self.split_ratio <= 1:
            raise ParameterError("split_ratio", f"must be in (0, 1], not {self.split_ratio}")
        if not self.merge_factor >= 0:
            raise ParameterError("merge_factor", f"must be >= 0, not {self.merge_factor}")
        if self.min_aggregation_size < 1:
            raise ParameterError(
                "min_aggregation_size", f"must be >= 1, not {self.min_aggregation_size}"
            )
        if self.max_clusters < 1:
            raise ParameterError("max_clusters", f"must be >= 1, not {self.max_clusters}")


@dataclass(frozen=True)
class Membership:
    """Clusters of one round and the candidates for its distance stage.

    Attributes:
        clusters: ``(cluster id, sorted members)`` in increasing id order, none empty.
        candidates: ``(cluster id, participant)`` proposed for a split test.
        next_id: the id a new cluster will get.
    """

    clusters: tuple[tuple[int, tuple[int, ...]], ...]
    candidates: tuple[tuple[int, int], ...] = ()
    next_id: int = 1

    def __post_init__(self) -> None:
        seen: set[int] = set()
        ids = [c for c, _ in self.clusters]
        if ids != sorted(set(ids)):
            raise ParameterError("clusters", "must be in increasing id order without repeats")
        for c, members in self.clusters:
            if not members or list(members) != sorted(set(members)):
                raise ParameterError("clusters", f"cluster {c} must be non-empty and sorted")
            if seen & set(members):
                raise ParameterError("clusters", f"cluster {c} overlaps another cluster")
            seen |= set(members)
        if ids and self.next_id <= max(ids):
            raise ParameterError("next_id", f"must exceed every cluster id, not {self.next_id}")

    @classmethod
    def initial(cls, participants: Iterable[int]) -> Membership:
        """Everybody in cluster 0 (warm-up and first clustering round)."""
        return cls(clusters=((0, tuple(sorted(set(participants)))),), candidates=(), next_id=1)

    def cluster_of(self, participant: int) -> int:
        """The cluster id of ``participant``."""
        for c, members in self.clusters:
            if participant in members:
                return c
        raise KeyError(f"participant {participant} is in no cluster")

    def members(self, cluster: int) -> tuple[int, ...]:
        """Members of ``cluster``."""
        return dict(self.clusters)[cluster]

    def reference_sets(self, present: Iterable[int], *, min_aggregation_size: int) -> ReferenceSets:
        """The distance stage's reference sets among participants who shared.

        Clusters are restricted to ``present`` members (empty ones are left out); a
        candidate is kept only if present and its cluster has at least
        ``2 * min_aggregation_size`` present members.
        """
        here = set(present)
        clusters = []
        candidates = []
        for c, members in self.clusters:
            kept = tuple(m for m in members if m in here)
            if kept:
                clusters.append((c, kept))
        sizes = dict(clusters)
        for c, k in self.candidates:
            if c in sizes and k in sizes[c] and len(sizes[c]) >= 2 * min_aggregation_size:
                candidates.append((c, k))
        return ReferenceSets(tuple(sorted(here)), tuple(clusters), tuple(candidates))

    def aggregation_sets(
        self, present: Iterable[int], *, min_aggregation_size: int
    ) -> list[tuple[int, tuple[int, ...]]]:
        """``(cluster id, present members)`` of clusters large enough to aggregate."""
        here = set(present)
        out = []
        for c, members in self.clusters:
            kept = tuple(m for m in members if m in here)
            if len(kept) >= min_aggregation_size:
                out.append((c, kept))
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "clusters": [[c, list(m)] for c, m in self.clusters],
            "candidates": [[c, k] for c, k in self.candidates],
            "next_id": self.next_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Membership:
        """Inverse of :meth:`to_dict`."""
        return cls(
            clusters=tuple((int(c), tuple(int(x) for x in m)) for c, m in data["clusters"]),
            candidates=tuple((int(c), int(k)) for c, k in data["candidates"]),
            next_id=int(data["next_id"]),
        )


@dataclass(frozen=True)
class Split:
    """Cluster ``parent`` lost ``members`` (candidate first) to the new cluster ``child``."""

    parent: int
    child: int
    candidate: int
    members: tuple[int, ...]
    ratio: float


@dataclass(frozen=True)
class Merge:
    """Cluster ``removed`` was merged into ``kept``."""

    kept: int
    removed: int
    centre_distance: float


@dataclass(frozen=True)
class StepResult:
    """Outcome of :func:`secpc_step`."""

    membership: Membership
    assignment: dict[int, int]
    splits: tuple[Split, ...] = ()
    merges: tuple[Merge, ...] = ()
    split_ratios: dict[int, float] = field(default_factory=dict)


def _argmin_cluster(row: NDArray[np.float64], ids: list[int]) -> int:
    return ids[int(np.argmin(row))]  # argmin returns the first minimum: lowest id


def secpc_step(
    distances: Distances, membership: Membership, config: ClusteringConfig
) -> StepResult:
    """The clustering step (module docstring); a pure function of its inputs."""
    refs = distances.refs
    ids = [c for c, _ in refs.clusters]
    n_c = len(ids)
    col_of = {c: n for n, c in enumerate(ids)}
    cand_col = {c: n_c + n for n, (c, _) in enumerate(refs.candidates)}
    D = distances.point
    row = {p: n for n, p in enumerate(refs.participants)}

    # 1. assignment of present participants; absent ones keep their cluster.
    assignment = {p: _argmin_cluster(D[row[p], :n_c], ids) for p in refs.participants}
    for c, members in membership.clusters:
        for m in members:
            assignment.setdefault(m, c)
    groups: dict[int, list[int]] = {}
    for p in sorted(assignment):
        groups.setdefault(assignment[p], []).append(p)

    # 2. splits.
    next_id = membership.next_id
    splits: list[Split] = []
    ratios: dict[int, float] = {}
    n_clusters = len(groups)
    for c, k in refs.candidates:
        members_a = [i for i in groups.get(c, []) if i != k and i in row]
        if not members_a:
            continue
        d_c = np.array([D[row[i], col_of[c]] for i in members_a])
        d_k = np.array([D[row[i], cand_col[c]] for i in members_a])
        s0 = float(d_c.sum())
        s1 = float(np.minimum(d_c, d_k).sum())
        ratio = s1 / s0 if s0 > 0 else 1.0
        ratios[c] = ratio
        closer = [i for i, a, b in zip(members_a, d_c, d_k, strict=True) if b < a]
        group = [k, *closer]
        if (
            ratio < config.split_ratio
            and len(group) >= config.min_aggregation_size
            and n_clusters < config.max_clusters
        ):
            child = next_id
            next_id += 1
            n_clusters += 1
            for i in group:
                groups[assignment[i]].remove(i)
                assignment[i] = child
            groups[child] = sorted(group)
            splits.append(Split(c, child, k, tuple(group), ratio))

    # 3. merge (among clusters present in E that did not split this round).
    split_parents = {s.parent for s in splits}
    spread = {}
    for c in ids:
        in_c = [i for i in groups.get(c, []) if i in row]
        if in_c and c not in split_parents:
            spread[c] = statistics.median(float(D[row[i], col_of[c]]) for i in in_c)
    merges: list[Merge] = []
    best: tuple[float, int, int] | None = None
    for a in range(n_c):
        for b in range(a + 1, n_c):
            ca, cb = ids[a], ids[b]
            if ca not in spread or cb not in spread:
                continue
            e = float(distances.centre[a, b])
            if e < config.merge_factor * (spread[ca] + spread[cb]) / 2 and (
                best is None or e < best[0]
            ):
                best = (e, ca, cb)
    if best is not None:
        e, kept, removed = best
        for i in groups.pop(removed, []):
            assignment[i] = kept
            groups[kept].append(i)
        groups[kept].sort()
        merges.append(Merge(kept, removed, e))

    # 4. drop empty clusters; candidates for the next round.
    clusters = tuple((c, tuple(sorted(m))) for c, m in sorted(groups.items()) if m)
    fresh = {s.child for s in splits} | {m.kept for m in merges}
    candidates = []
    for c, members in clusters:
        if c in fresh or c not in col_of:
            continue
        scored = [(float(D[row[i], col_of[c]]), -i) for i in members if i in row]
        if scored:
            candidates.append((c, -max(scored)[1]))
    new_membership = Membership(clusters, tuple(candidates), next_id)
    return StepResult(new_membership, assignment, tuple(splits), tuple(merges), ratios)


def inherit_prompts(
    prompts: Mapping[int, NDArray[np.float64]],
    previous: Membership,
    result: StepResult,
) -> dict[int, NDArray[np.float64]]:
    """Global prompts of the next round's clusters.

    A cluster that existed keeps its prompt; a new cluster starts from its parent's; a
    merged cluster gets the size-weighted mean (sizes in ``previous``) of the two.
    """
    sizes = {c: len(m) for c, m in previous.clusters}
    out = {
        c: np.array(prompts[c], copy=True) for c, _ in result.membership.clusters if c in prompts
    }
    for split in result.splits:
        out[split.child] = np.array(prompts[split.parent], copy=True)
    for merge in result.merges:
        wk, wr = sizes.get(merge.kept, 0), sizes.get(merge.removed, 0)
        total = wk + wr
        if total:
            out[merge.kept] = (wk * prompts[merge.kept] + wr * prompts[merge.removed]) / total
    live = {c for c, _ in result.membership.clusters}
    return {c: p for c, p in out.items() if c in live}
