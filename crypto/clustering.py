"""The SecPC clustering step (docs/protocol.md, "Clustering step"): pure and deterministic.

:class:`Membership` is the cluster state everybody trains under in a round: clusters
(id -> members). The *probe* a distance stage measures a cluster against (a proper subset
of it, see below) is drawn by :meth:`Membership.reference_sets` from the round's beacon.

:func:`secpc_step` maps decoded :class:`~crypto.secpc.Distances` (``D``: squared
point-to-reference-set distances, ``E``: squared centre-centre distances) and the current
membership to the next membership:

The step changes the membership by at most one split or one merge, the only changes
participants accept from one round to the next (:mod:`crypto.refset_rules`: a
coordinator free to regroup members could name whatever reference sets it liked):

1. **assign**: members keep their cluster. (An earlier version moved members by
   Hartigan's rule; every such move is a membership change participants now refuse.)
   A present participant in no cluster (enrolled late) joins the cluster of least
   ``m_c' / (m_c' + 1) D[i, c']``, what joining adds;
2. **split** (at most one per round, never beyond ``max_clusters``): for every cluster
   ``c`` with a probe ``P``, every member's self-corrected coordinate ``f_i`` on the axis
   between ``P`` and the rest of ``c`` is computed from ``D[., c]`` and ``D[., P]`` alone
   (:func:`crypto.split_test.probe_coordinates`), far members are set aside
   (:func:`crypto.split_test.far_members`), and the best two-means cut of the ``f``
   (both parts of at least ``min_aggregation_size``, outliers trimmed,
   :func:`crypto.split_test.best_cut`) passes when either
   (a) ``W2 / W1 < split_threshold`` (a clean gap on the axis), or
   (b) the cut reproduces the probe partition (up to :data:`PROBE_SLACK` member), that
   partition holds ``beta_P >= probe_fraction`` of the cluster's full-dimensional sum of
   squares (:func:`crypto.split_test.probe_between_fraction`) and
   ``W2 / W1 < probe_ratio``.
   Of the passing clusters the one with the least ``W2 / W1`` splits: the smaller part
   becomes the new cluster (equal parts: the one without the lowest participant id, so
   the outcome does not depend on the probe drawn). ``W2 / W1`` of every tested cluster
   is recorded in :attr:`StepResult.split_ratios`;
3. **merge** (only in a round without a split): the closest pair with
   ``E[c, c'] < merge_factor * (s_c + s_c') / 2``, ``s_c = median{D[i, c] : a(i) = c}``,
   is merged into the lower id;
4. empty clusters disappear. No probe is carried to the next round: the next round's
   probes are drawn from its beacon (:meth:`Membership.reference_sets`,
   :func:`crypto.refset_rules.probe_salt`). An earlier version refined each probe from
   the decoded distances (a power-iteration step); that let the coordinator choose
   probes, which participants now refuse.

Why probes and not DESIGN.md's singleton candidate ``{k}``. A distance to a one-member
set is a distance to one participant's prompt, which the coordinator must not learn
(docs/protocol.md, "Refusal rules"); and the singleton test has little power: with two
groups ``Delta`` apart in ``r`` dimensions with per-coordinate spread ``sigma``, a member
is nearer to ``x_k`` than to ``mu_c`` only if roughly ``Delta^2 > 4 r sigma^2``, and a
near-identical pair of outliers captured the candidate every round. A probe of about half
the cluster measures one linear functional of each member, like the axis towards ``x_k``,
but its centre averages ``m`` prompts, and the coordinate removes the typical pull of
each member's own noise towards its own part. First probes have an odd size near
``n/2``, so that two equal groups can never be exactly balanced in them (an exactly
balanced probe has no axis to offer).

Measured on simulated prompts (``r = 128``, unit per-coordinate spread, persistent
member offsets plus 0.2 jitter per round, three rounds, ``python -m bench.clustering``)
and on the demo's real prompts (``python -m bench.split_rate``): see the README,
"Clustering on the demo's setting", for the figures.

Participants absent from ``D`` (they did not share this round) keep their cluster (and
follow it if it merges).
"""

from __future__ import annotations

import hashlib
import itertools
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.errors import ParameterError
from secfpp.crypto.secpc import Distances, ReferenceSets
from secfpp.crypto.split_test import (
    best_cut,
    far_members,
    probe_between_fraction,
    probe_coordinates,
)

__all__ = [
    "ClusteringConfig",
    "Membership",
    "Merge",
    "Split",
    "StepResult",
    "inherit_prompts",
    "initial_probe",
    "secpc_step",
]


MIN_TESTED_MEMBERS = 6
"""A cluster gets a probe (a split test) only with at least this many present members
(and ``2 * min_aggregation_size``): on five or fewer points a two-part cut of a single
group is often clean, and two small halves of one group are not merged back (their
centres are farther apart than their spreads)."""


PROBE_SLACK = 1
"""The cut confirms the probe partition when it differs from it (or its complement) by at
most this many members; one misplaced member moves to its own group at the next
assignment (step 1, Hartigan's rule)."""


@dataclass(frozen=True)
class ClusteringConfig:
    """Factors of the clustering step (module docstring).

    Attributes:
        split_threshold: a cluster splits when the best cut's ``W2 / W1`` is below it.
        merge_factor: merge two clusters whose centres are closer than this times their
            mean median spread.
        min_aggregation_size: smallest cluster a split may create.
        min_reference_size: smallest reference set (cluster, probe, or what a probe leaves
            of its cluster) a distance request may name; participants refuse smaller ones,
            and anything below :data:`crypto.refset_rules.REFERENCE_FLOOR` (3).
        max_clusters: upper bound on the number of clusters.
        max_trim, trim_factor: outlier trimming of the split test
            (:func:`crypto.split_test.best_cut`).
        probe_fraction, probe_ratio: the second way to split (module doc, step 2): the
            cut reproduces the probe partition, the probe partition holds at least
            ``probe_fraction`` of the cluster's total sum of squares
            (:func:`crypto.split_test.probe_between_fraction`) and ``W2 / W1 <
            probe_ratio``.
    """

    split_threshold: float = 0.03
    merge_factor: float = 1.0
    min_aggregation_size: int = 3
    min_reference_size: int = 3
    max_clusters: int = 8
    max_trim: int = 2
    trim_factor: float = 3.0
    probe_fraction: float = 0.30
    probe_ratio: float = 0.15

    def __post_init__(self) -> None:
        if not 0 < self.split_threshold <= 1:
            raise ParameterError(
                "split_threshold", f"must be in (0, 1], not {self.split_threshold}"
            )
        if not self.merge_factor >= 0:
            raise ParameterError("merge_factor", f"must be >= 0, not {self.merge_factor}")
        if self.min_aggregation_size < 1:
            raise ParameterError(
                "min_aggregation_size", f"must be >= 1, not {self.min_aggregation_size}"
            )
        if self.min_reference_size < 1:
            raise ParameterError(
                "min_reference_size", f"must be >= 1, not {self.min_reference_size}"
            )
        if self.max_clusters < 1:
            raise ParameterError("max_clusters", f"must be >= 1, not {self.max_clusters}")
        if not 0 <= self.max_trim <= 4:
            raise ParameterError("max_trim", f"must be in [0, 4], not {self.max_trim}")
        if not self.trim_factor > 1:
            raise ParameterError("trim_factor", f"must be > 1, not {self.trim_factor}")
        if not 0 < self.probe_fraction <= 1.5:
            raise ParameterError(
                "probe_fraction", f"must be in (0, 1.5] (above 1: never), not {self.probe_fraction}"
            )
        if not 0 < self.probe_ratio <= 1:
            raise ParameterError("probe_ratio", f"must be in (0, 1], not {self.probe_ratio}")


def initial_probe(
    members: tuple[int, ...], *, min_reference_size: int, salt: str
) -> tuple[int, ...]:
    """A first probe for a cluster: an odd number of members near ``n/2`` (an even one
    only when no odd size leaves both parts ``min_reference_size`` members), picked by a
    public hash of ``salt`` and the members (reproducible, not secret; see module doc).

    Returns ``()`` when no probe with both parts of ``min_reference_size`` exists.
    """
    n = len(members)
    half = n // 2
    sizes = [half, half - 1, half + 1] if half % 2 else [half - 1, half + 1, half]
    fits = [k for k in sizes if k >= min_reference_size and n - k >= min_reference_size]
    if not fits:
        return ()
    size = fits[0]

    def rank(m: int) -> bytes:
        return hashlib.sha256(f"secfpp-probe|{salt}|{m}".encode()).digest()

    return tuple(sorted(sorted(members, key=rank)[:size]))


@dataclass(frozen=True)
class Membership:
    """Clusters of one round and the probes for its distance stage.

    Attributes:
        clusters: ``(cluster id, sorted members)`` in increasing id order, none empty.
        probes: ``(cluster id, sorted members)``: refined probes stored by earlier
            versions; read and kept for compatibility, never used (probes are drawn from the
            round's beacon, :meth:`reference_sets`). :func:`secpc_step` leaves it empty.
        next_id: the id a new cluster will get.
    """

    clusters: tuple[tuple[int, tuple[int, ...]], ...]
    probes: tuple[tuple[int, tuple[int, ...]], ...] = ()
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
        probed = [c for c, _ in self.probes]
        if len(probed) != len(set(probed)) or not set(probed) <= set(ids):
            raise ParameterError("probes", "at most one probe per existing cluster")

    @classmethod
    def initial(cls, participants: Iterable[int]) -> Membership:
        """Everybody in cluster 0 (warm-up and first clustering round)."""
        return cls(clusters=((0, tuple(sorted(set(participants)))),), probes=(), next_id=1)

    def cluster_of(self, participant: int) -> int:
        """The cluster id of ``participant``."""
        for c, members in self.clusters:
            if participant in members:
                return c
        raise KeyError(f"participant {participant} is in no cluster")

    def members(self, cluster: int) -> tuple[int, ...]:
        """Members of ``cluster``."""
        return dict(self.clusters)[cluster]

    def reference_sets(
        self,
        present: Iterable[int],
        *,
        min_aggregation_size: int,
        min_reference_size: int,
        salt: str | None,
    ) -> ReferenceSets | None:
        """The distance stage's reference sets among participants who shared.

        Clusters are restricted to ``present`` members; those with fewer than
        ``min_reference_size`` present members are left out (their members keep their
        cluster). A cluster with at least ``max(2 * min_aggregation_size,``
        :data:`MIN_TESTED_MEMBERS` ``)`` present members gets a probe:
        :func:`initial_probe` of its present members with ``salt`` (the coordinator
        passes :func:`crypto.refset_rules.probe_salt` of the round's beacon, so the
        coordinator does not choose it; stored :attr:`probes` are not used). No probe
        when ``salt`` is None. ``None`` when no cluster qualifies.
        """
        here = set(present)
        clusters = []
        for c, members in self.clusters:
            kept = tuple(m for m in members if m in here)
            if len(kept) >= min_reference_size:
                clusters.append((c, kept))
        if not clusters:
            return None
        probes = []
        for c, kept in clusters:
            if salt is None or len(kept) < max(2 * min_aggregation_size, MIN_TESTED_MEMBERS):
                continue
            probe = initial_probe(kept, min_reference_size=min_reference_size, salt=f"{salt}|{c}")
            if probe:
                probes.append((c, probe))
        return ReferenceSets(tuple(sorted(here)), tuple(clusters), tuple(probes))

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
            "probes": [[c, list(m)] for c, m in self.probes],
            "next_id": self.next_id,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Membership:
        """Inverse of :meth:`to_dict` (states stored with singleton candidates load
        without probes)."""
        return cls(
            clusters=tuple((int(c), tuple(int(x) for x in m)) for c, m in data["clusters"]),
            probes=tuple((int(c), tuple(int(x) for x in m)) for c, m in data.get("probes", [])),
            next_id=int(data["next_id"]),
        )


@dataclass(frozen=True)
class Split:
    """Cluster ``parent`` lost ``members`` to the new cluster ``child``."""

    parent: int
    child: int
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
    """Outcome of :func:`secpc_step`.

    ``split_ratios``: ``W2 / W1`` of every tested cluster. ``Split.ratio`` is the
    statistic that decided the split.
    """

    membership: Membership
    assignment: dict[int, int]
    splits: tuple[Split, ...] = ()
    merges: tuple[Merge, ...] = ()
    split_ratios: dict[int, float] = field(default_factory=dict)


def _argmin_cluster(row: NDArray[np.float64], ids: list[int]) -> int:
    return ids[int(np.argmin(row))]  # argmin returns the first minimum: lowest id


def _assign(
    distances: Distances, membership: Membership
) -> tuple[dict[int, int], dict[int, list[int]]]:
    """Members keep their cluster (the membership-change rule, module doc step 1); a
    present participant in no cluster joins the nearest, by what joining adds."""
    refs = distances.refs
    ids = [c for c, _ in refs.clusters]
    row = {p: n for n, p in enumerate(refs.participants)}
    assignment: dict[int, int] = {}
    for c, members in membership.clusters:
        for m in members:
            assignment[m] = c
    sizes = np.array([len(m) for _, m in refs.clusters], dtype=np.float64)
    for p in refs.participants:
        if p not in assignment:
            cost = distances.point[row[p], : len(ids)] * sizes / (sizes + 1.0)
            assignment[p] = _argmin_cluster(cost, ids)
    groups: dict[int, list[int]] = {}
    for p in sorted(assignment):
        groups.setdefault(assignment[p], []).append(p)
    return assignment, groups


@dataclass(frozen=True)
class _Candidate:
    parent: int
    moved: tuple[int, ...]
    ratio: float


def _split_candidate(
    distances: Distances,
    c: int,
    probe: tuple[int, ...],
    groups: Mapping[int, list[int]],
    config: ClusteringConfig,
) -> tuple[float, _Candidate | None]:
    """The split test of cluster ``c`` along its probe (module doc, step 2): the best
    cut's ``W2 / W1`` and the split it would make, if it passes."""
    refs = distances.refs
    col = [cid for cid, _ in refs.clusters].index(c)
    probe_col = len(refs.clusters) + [cid for cid, _ in refs.probes].index(c)
    members = list(dict(refs.clusters)[c])
    row = {p: n for n, p in enumerate(refs.participants)}
    rows = [row[i] for i in members]
    D = distances.point
    in_probe = np.isin(members, probe)
    f = probe_coordinates(D[rows, col], D[rows, probe_col], in_probe)
    beta = probe_between_fraction(D[rows, col], D[rows, probe_col], in_probe)
    aside = far_members(
        D[rows, col],
        max_trim=config.max_trim,
        trim_factor=config.trim_factor,
        group_size=config.min_aggregation_size,
    )
    cut = best_cut(
        f,
        min_size=config.min_aggregation_size,
        max_trim=config.max_trim,
        trim_factor=config.trim_factor,
        aside=aside,
    )
    high = {members[n] for n in cut.high}
    rest = set(members) - set(probe)
    confirmed = min(len(high ^ set(probe)), len(high ^ rest)) <= PROBE_SLACK
    passes = cut.ratio < config.split_threshold or (
        confirmed and beta >= config.probe_fraction and cut.ratio < config.probe_ratio
    )
    still = set(groups.get(c, []))
    high_part, low_part = sorted(still & high), sorted(still - high)
    if not passes or min(len(high_part), len(low_part)) < config.min_aggregation_size:
        return cut.ratio, None
    if len(high_part) != len(low_part):
        moved = min(high_part, low_part, key=len)
    else:  # the part without the lowest id moves: independent of the probe drawn
        moved = low_part if high_part[0] < low_part[0] else high_part
    return cut.ratio, _Candidate(c, tuple(moved), cut.ratio)


def _split_step(
    distances: Distances,
    groups: dict[int, list[int]],
    assignment: dict[int, int],
    next_id: int,
    config: ClusteringConfig,
) -> tuple[list[Split], dict[int, float], int]:
    """Step 2 (module docstring): test every cluster with a probe and split the one whose
    passing cut has the least ``W2 / W1``, unless ``max_clusters`` clusters exist already.

    Updates ``groups`` and ``assignment`` in place; returns the split (zero or one), the
    ``W2 / W1`` of every tested cluster and the next unused cluster id.
    """
    refs = distances.refs
    sizes = {c: len(members) for c, members in refs.clusters}
    ratios: dict[int, float] = {}
    best: _Candidate | None = None
    for c, probe in refs.probes:
        if not 2 <= len(probe) <= sizes[c] - 2:
            continue  # no axis to measure
        ratios[c], candidate = _split_candidate(distances, c, probe, groups, config)
        if candidate is not None and (best is None or candidate.ratio < best.ratio):
            best = candidate
    if best is None or len(groups) >= config.max_clusters:
        return [], ratios, next_id
    child = next_id
    for i in best.moved:
        groups[best.parent].remove(i)
        assignment[i] = child
    groups[child] = list(best.moved)
    return [Split(best.parent, child, best.moved, best.ratio)], ratios, next_id + 1


def _closest_mergeable(
    distances: Distances, groups: Mapping[int, list[int]], config: ClusteringConfig
) -> tuple[float, int, int] | None:
    """Step 3's pair: the least ``E[c, c']`` below ``merge_factor * (s_c + s_c') / 2``,
    ``s_c`` the median ``D[i, c]`` over the present members ``i`` of ``c``; ``(E, c, c')``
    with ``c < c'`` in the announced order, or ``None``."""
    refs = distances.refs
    ids = [c for c, _ in refs.clusters]
    row = {p: n for n, p in enumerate(refs.participants)}
    D = distances.point
    spread: dict[int, float] = {}
    for col, c in enumerate(ids):
        in_c = [i for i in groups.get(c, []) if i in row]
        if in_c:
            spread[c] = statistics.median(float(D[row[i], col]) for i in in_c)
    best: tuple[float, int, int] | None = None
    for a, b in itertools.combinations(range(len(ids)), 2):
        ca, cb = ids[a], ids[b]
        if ca not in spread or cb not in spread:
            continue
        e = float(distances.centre[a, b])
        if e < config.merge_factor * (spread[ca] + spread[cb]) / 2 and (
            best is None or e < best[0]
        ):
            best = (e, ca, cb)
    return best


def _merge_step(
    distances: Distances,
    groups: dict[int, list[int]],
    assignment: dict[int, int],
    config: ClusteringConfig,
) -> list[Merge]:
    """Step 3 (module docstring): merge the closest qualifying pair into the lower id.

    Updates ``groups`` and ``assignment`` in place; returns the merge (zero or one).
    """
    best = _closest_mergeable(distances, groups, config)
    if best is None:
        return []
    e, kept, removed = best
    for i in groups.pop(removed, []):
        assignment[i] = kept
        groups[kept].append(i)
    groups[kept].sort()
    return [Merge(kept, removed, e)]


def secpc_step(
    distances: Distances, membership: Membership, config: ClusteringConfig
) -> StepResult:
    """The clustering step (module docstring); a pure function of its inputs.

    The four steps: :func:`_assign` (1), :func:`_split_step` (2), :func:`_merge_step` (3,
    only in a round without a split), then empty clusters are dropped (4).

    The result differs from ``membership`` by at most one split or one merge (and new
    participants joining), the change participants accept next round
    (:func:`crypto.refset_rules.check_membership_change`); its probes are empty (the next
    round draws them from its beacon).
    """
    # 1. assign: members keep their cluster; late joiners join the cheapest one.
    assignment, groups = _assign(distances, membership)
    # 2. split: the tested cluster whose passing cut is cleanest, at most one per round.
    splits, ratios, next_id = _split_step(distances, groups, assignment, membership.next_id, config)
    # 3. merge (only in a round without a split): the closest qualifying pair.
    merges = [] if splits else _merge_step(distances, groups, assignment, config)
    # 4. drop empty clusters.
    clusters = tuple((c, tuple(sorted(m))) for c, m in sorted(groups.items()) if m)
    new_membership = Membership(clusters, (), next_id)
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
