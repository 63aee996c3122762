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
   (:func:`crypto.split_rule.probe_coordinates`), far members are set aside
   (:func:`crypto.split_rule.far_members`), and the best two-means cut of the ``f``
   (both parts of at least ``min_aggregation_size``, outliers trimmed,
   :func:`crypto.split_rule.best_cut`) is tested against the fitted null of one Gaussian
   group (:func:`crypto.split_rule.split_p_value`, public draws keyed by ``salt`` and the
   cluster id): it passes when its p-value is at most the level of the cluster's ``k``-th
   test, :func:`split_level` ``false_split_rate / (k (k + 1))``, so that a cluster of one
   group splits with probability at most ``false_split_rate`` over all its tests (the
   count is :attr:`Membership.tests`). Clusters in ``frozen`` (a split of theirs was undone lately,
   :mod:`crypto.split_review`) are tested but do not split. Of the passing clusters the
   one with the least p-value relative to its level (then the least ``W2 / W1``) splits:
   the smaller part becomes the new cluster (equal parts: the one without the lowest
   participant id, so the outcome does not depend on the probe drawn). ``W2 / W1``, the
   p-value and the level of every tested cluster are recorded in
   :attr:`StepResult.split_ratios`, :attr:`StepResult.split_levels` and
   :attr:`StepResult.split_p_values`;
3. **merge** (only in a round without a split): an undo (``undo = (parent, child)``,
   decided by :mod:`crypto.split_review` from the members' reported accuracy) merges the
   child back into its parent and replaces both the split and the spread rule below;
   otherwise the closest pair with
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
each member's own noise towards its own part. A probe's size is within one of ``n/2`` and
coprime with ``n`` where such a size exists (:func:`probe_size`), so that no grouping of the
cluster can be exactly balanced in it (an exactly balanced probe has no axis to offer).

Measured on simulated prompts (``r = 128``, unit per-coordinate spread, persistent
member offsets plus 0.2 jitter per round, three rounds, ``python -m bench.clustering.probe_split``)
and on the demo's real prompts (``python -m bench.clustering.split_rate``): see the README,
"Clustering on the demo's setting", for the figures.

Participants absent from ``D`` (they did not share this round) keep their cluster (and
follow it if it merges).
"""

from __future__ import annotations

import hashlib
import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.errors import ParameterError
from secfpp.crypto.secpc import Distances, ReferenceSets
from secfpp.crypto.split_rule import split_p_value, within_level

__all__ = [
    "MAX_NULL_DRAWS",
    "ClusteringConfig",
    "Membership",
    "Merge",
    "Split",
    "StepResult",
    "inherit_prompts",
    "initial_probe",
    "null_draws_for",
    "probe_size",
    "secpc_step",
    "split_level",
]


MIN_TESTED_MEMBERS = 6
"""A cluster gets a probe (a split test) only with at least this many present members
(and ``2 * min_aggregation_size``): on five or fewer points a two-part cut of a single
group is often clean, and two small halves of one group are not merged back (their
centres are farther apart than their spreads)."""


MAX_NULL_DRAWS = 9999
"""The most null clusters one split test draws. A test whose level needs more
(:func:`null_draws_for`) is not made: the cluster's false-split budget is spent (with
``false_split_rate`` 0.05, after 15 tests without a split)."""


def split_level(false_split_rate: float, test: int) -> float:
    """``alpha_k = alpha / (k (k + 1))``, the level of a cluster's ``k``-th split test
    (``k >= 1``): ``sum_k alpha_k = alpha`` (a telescoping sum), so a cluster of one group
    splits with probability at most ``alpha`` however many rounds it is tested (a union
    bound over its tests; each test is exact at its level). The first test gets
    ``alpha / 2``, the second ``alpha / 6``, the sixth ``alpha / 42``."""
    if test < 1:
        raise ParameterError("test", f"must be >= 1, not {test}")
    return false_split_rate / (test * (test + 1))


def null_draws_for(level: float, minimum: int) -> int:
    """Null clusters for a test at ``level``: at least ``minimum`` and enough that a
    passing p-value leaves two null ratios at or below the observed one
    (``B + 1 = max(minimum + 1, ceil(2 / level))``)."""
    return max(minimum, math.ceil(2.0 / level - 1e-9) - 1)


@dataclass(frozen=True)
class ClusteringConfig:
    """Factors of the clustering step (module docstring).

    Attributes:
        false_split_rate: ``alpha``, a bound on the probability that a cluster of a single
            Gaussian group *ever* splits, over all the tests it is given: its ``k``-th test
            passes at level :func:`split_level` ``alpha / (k (k + 1))``, and these sum to
            ``alpha`` (:func:`crypto.split_rule.split_p_value` is exact at each level).
        null_draws: ``B``, the fewest null clusters a test draws; a test at a level below
            ``2 / (B + 1)`` draws :func:`null_draws_for` that level (a curtailed test:
            few unless the cluster is about to split).
        merge_factor: merge two clusters whose centres are closer than this times their
            mean median spread.
        min_aggregation_size: smallest cluster a split may create.
        min_reference_size: smallest reference set (cluster, probe, or what a probe leaves
            of its cluster) a distance request may name; participants refuse smaller ones,
            and anything below :data:`crypto.refset_rules.REFERENCE_FLOOR` (3).
        max_clusters: upper bound on the number of clusters.
        max_trim, trim_factor: outlier trimming of the split rule
            (:func:`crypto.split_rule.best_cut`).
    """

    false_split_rate: float = 0.05
    null_draws: int = 199
    merge_factor: float = 1.0
    min_aggregation_size: int = 3
    min_reference_size: int = 3
    max_clusters: int = 8
    max_trim: int = 2
    trim_factor: float = 3.0

    def __post_init__(self) -> None:
        if not 0 < self.false_split_rate <= 0.5:
            raise ParameterError(
                "false_split_rate", f"must be in (0, 0.5], not {self.false_split_rate}"
            )
        if not 19 <= self.null_draws <= 9999:
            raise ParameterError("null_draws", f"must be in [19, 9999], not {self.null_draws}")
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


def probe_size(n: int, *, min_reference_size: int) -> int:
    """The size of a first probe of ``n`` present members: a size within one of ``n / 2``
    that is coprime with ``n`` (the smaller of two), else ``n / 2`` itself (``n = 2h``
    with ``h`` odd, where none is), among the sizes that leave both parts
    ``min_reference_size`` members; when neither fits, the fitting size nearest ``n / 2``
    (an odd one first); 0 when no size leaves both parts that large.

    Why coprime: a probe ``P`` of ``m`` members measures the axis
    ``mu_P - mu_{c-P} = sum_g (k_g / m - (s_g - k_g) / (n - m)) mu_g`` over the groups ``g``
    (``s_g`` members, ``k_g`` of them in ``P``), whose group part vanishes exactly when
    ``k_g / m = s_g / n`` for every group: the probe then holds each group in proportion and
    its axis is noise alone. That needs ``n`` to divide ``m s_g``; with ``gcd(m, n) = 1`` it
    needs ``n`` to divide ``s_g``, which no proper group does. The earlier rule (an odd size
    near ``n / 2``) guarded only against two equal groups: with 3 + 3 + 3 members it drew 3,
    which holds one of each group in 27 of the 84 probes of that size. For odd ``n`` both
    ``(n - 1) / 2`` and ``(n + 1) / 2`` are coprime with ``n``; for ``n = 2h`` with ``h``
    even, ``h - 1`` is. For ``n = 2h`` with ``h`` odd (10, 14, 18) no size within one is,
    and ``h`` is taken: it is odd, so two equal groups are never balanced in it, though
    groups of even sizes can be (6 + 4 at ``n = 10``: 3 + 2). A size further from ``n / 2``
    is not the cure: the axis of a probe of ``m`` members carries a group of ``s`` by
    ``|k n - s m| / (m (n - m))``, and a small probe is nearly balanced on a small group
    (``n = 10``, ``s = 3``: one member of three in a probe of 3, 52% of the draws);
    measured on two groups of 7 + 3 (``two_groups`` of ``tests/crypto/test_clustering.py``,
    gap 1.5, 40 seeds), a probe of 3 parted 30 of 40 by the third round, one of 5 all 40."""
    least = max(min_reference_size, 1)
    fits = list(range(least, n - least + 1))
    if not fits:
        return 0
    near = [k for k in fits if abs(2 * k - n) <= 2]
    coprime = [k for k in near if math.gcd(k, n) == 1]
    if coprime:
        return min(coprime)
    if n % 2 == 0 and n // 2 in fits:
        return n // 2
    return min(fits, key=lambda k: (abs(2 * k - n), k % 2 == 0, k))


def initial_probe(
    members: tuple[int, ...], *, min_reference_size: int, salt: str
) -> tuple[int, ...]:
    """A first probe for a cluster: :func:`probe_size` members (within one of ``n / 2``,
    coprime with ``n`` where such a size exists), picked by a public hash of ``salt`` and
    the members (reproducible, not secret; see module doc).

    Returns ``()`` when no probe with both parts of ``min_reference_size`` exists.
    """
    size = probe_size(len(members), min_reference_size=min_reference_size)
    if not size:
        return ()

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
        watches: ``(parent, child, round)``: splits made by round ``round``'s clustering
            step whose accuracy review is pending (:mod:`crypto.split_review`).
        frozen: ``(cluster id, last round)``: clusters that may not split up to and
            including that round (a split of theirs was undone).
        tests: ``(cluster id, split tests made)``: how much of its false-split budget
            each cluster has spent (:func:`split_level`); absent means none. A split
            starts both its parts afresh; a merge keeps the larger count.
    """

    clusters: tuple[tuple[int, tuple[int, ...]], ...]
    probes: tuple[tuple[int, tuple[int, ...]], ...] = ()
    next_id: int = 1
    watches: tuple[tuple[int, int, int], ...] = ()
    frozen: tuple[tuple[int, int], ...] = ()
    tests: tuple[tuple[int, int], ...] = ()

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
        counted = [c for c, _ in self.tests]
        if counted != sorted(set(counted)) or not set(counted) <= set(ids):
            raise ParameterError("tests", "one sorted count per existing cluster")
        if any(k < 0 for _, k in self.tests):
            raise ParameterError("tests", "counts must be >= 0")

    def tests_made(self, cluster: int) -> int:
        """Split tests ``cluster`` has had (see :attr:`tests`)."""
        return dict(self.tests).get(cluster, 0)

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
        out: dict[str, Any] = {
            "clusters": [[c, list(m)] for c, m in self.clusters],
            "probes": [[c, list(m)] for c, m in self.probes],
            "next_id": self.next_id,
        }
        if self.watches:
            out["watches"] = [list(w) for w in self.watches]
        if self.frozen:
            out["frozen"] = [list(f) for f in self.frozen]
        if self.tests:
            out["tests"] = [list(t) for t in self.tests]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Membership:
        """Inverse of :meth:`to_dict` (states stored with singleton candidates load
        without probes)."""
        return cls(
            clusters=tuple((int(c), tuple(int(x) for x in m)) for c, m in data["clusters"]),
            probes=tuple((int(c), tuple(int(x) for x in m)) for c, m in data.get("probes", [])),
            next_id=int(data["next_id"]),
            watches=tuple((int(p), int(c), int(r)) for p, c, r in data.get("watches", [])),
            frozen=tuple((int(c), int(r)) for c, r in data.get("frozen", [])),
            tests=tuple((int(c), int(k)) for c, k in data.get("tests", [])),
        )


@dataclass(frozen=True)
class Split:
    """Cluster ``parent`` lost ``members`` to the new cluster ``child``."""

    parent: int
    child: int
    members: tuple[int, ...]
    ratio: float
    p_value: float = 0.0


@dataclass(frozen=True)
class Merge:
    """Cluster ``removed`` was merged into ``kept``."""

    kept: int
    removed: int
    centre_distance: float
    undo: bool = False


@dataclass(frozen=True)
class StepResult:
    """Outcome of :func:`secpc_step`.

    ``split_ratios``: ``W2 / W1`` of every tested cluster; ``split_p_values``: its
    p-value against the fitted null; ``split_levels``: the level it had to reach
    (:func:`split_level`). ``Split.p_value`` decided the split.
    """

    membership: Membership
    assignment: dict[int, int]
    splits: tuple[Split, ...] = ()
    merges: tuple[Merge, ...] = ()
    split_ratios: dict[int, float] = field(default_factory=dict)
    split_p_values: dict[int, float] = field(default_factory=dict)
    split_levels: dict[int, float] = field(default_factory=dict)


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
    p_value: float


def _split_candidate(
    distances: Distances,
    c: int,
    probe: tuple[int, ...],
    groups: Mapping[int, list[int]],
    config: ClusteringConfig,
    seed: str,
    level: float,
    draws: int,
) -> tuple[float, float, _Candidate | None]:
    """The split rule of cluster ``c`` along its probe (module doc, step 2) at ``level``
    with at most ``draws`` null clusters: the best cut's ``W2 / W1``, its p-value, and the
    split it would make if it passes."""
    refs = distances.refs
    col = [cid for cid, _ in refs.clusters].index(c)
    probe_col = len(refs.clusters) + [cid for cid, _ in refs.probes].index(c)
    members = list(dict(refs.clusters)[c])
    row = {p: n for n, p in enumerate(refs.participants)}
    rows = [row[i] for i in members]
    D = distances.point
    test = split_p_value(
        D[rows, col],
        D[rows, probe_col],
        np.isin(members, probe),
        draws=draws,
        seed=seed,
        min_size=config.min_aggregation_size,
        max_trim=config.max_trim,
        trim_factor=config.trim_factor,
        level=level,
    )
    cut = test.cut
    high = {members[n] for n in cut.high}
    still = set(groups.get(c, []))
    high_part, low_part = sorted(still & high), sorted(still - high)
    passes = within_level(test.p_value, level)
    if not passes or min(len(high_part), len(low_part)) < config.min_aggregation_size:
        return cut.ratio, test.p_value, None
    if len(high_part) != len(low_part):
        moved = min(high_part, low_part, key=len)
    else:  # the part without the lowest id moves: independent of the probe drawn
        moved = low_part if high_part[0] < low_part[0] else high_part
    return cut.ratio, test.p_value, _Candidate(c, tuple(moved), cut.ratio, test.p_value)


def _spread_merge(
    distances: Distances, groups: Mapping[int, list[int]], config: ClusteringConfig
) -> Merge | None:
    """The closest pair of clusters whose centres are nearer than ``merge_factor`` times
    their mean median spread (module doc, step 3), or None."""
    refs = distances.refs
    ids = [c for c, _ in refs.clusters]
    col_of = {c: n for n, c in enumerate(ids)}
    row = {p: n for n, p in enumerate(refs.participants)}
    D = distances.point
    spread = {}
    for c in ids:
        in_c = [i for i in groups.get(c, []) if i in row]
        if in_c:
            spread[c] = statistics.median(float(D[row[i], col_of[c]]) for i in in_c)
    best: tuple[float, int, int] | None = None
    for a in range(len(ids)):
        for b in range(a + 1, len(ids)):
            ca, cb = ids[a], ids[b]
            if ca not in spread or cb not in spread:
                continue
            e = float(distances.centre[a, b])
            if e < config.merge_factor * (spread[ca] + spread[cb]) / 2 and (
                best is None or e < best[0]
            ):
                best = (e, ca, cb)
    return None if best is None else Merge(best[1], best[2], best[0])


def _test_splits(
    distances: Distances,
    groups: dict[int, list[int]],
    membership: Membership,
    config: ClusteringConfig,
    salt: str | None,
    frozen: frozenset[int],
) -> tuple[dict[int, float], dict[int, float], dict[int, float], _Candidate | None]:
    """Step 2, the test: ``W2/W1``, the p-value and the level (:func:`split_level` of the
    cluster's next test) of every cluster with a probe axis and budget left, and the most
    significant passing cut of a cluster that may split (least ``(p / level, W2/W1)``)."""
    ratios: dict[int, float] = {}
    p_values: dict[int, float] = {}
    levels: dict[int, float] = {}
    best: _Candidate | None = None
    best_key = (math.inf, math.inf)
    sizes = {c: len(m) for c, m in distances.refs.clusters}
    for c, probe in distances.refs.probes:
        if not 2 <= len(probe) <= sizes[c] - 2:
            continue  # no axis to measure
        level = split_level(config.false_split_rate, membership.tests_made(c) + 1)
        draws = null_draws_for(level, config.null_draws)
        if draws > MAX_NULL_DRAWS:
            continue  # its false-split budget is spent
        seed = f"{'unsalted' if salt is None else salt}|{c}"
        ratios[c], p_values[c], candidate = _split_candidate(
            distances, c, probe, groups, config, seed, level, draws
        )
        levels[c] = level
        if candidate is None or c in frozen:
            continue
        key = (candidate.p_value / level, candidate.ratio)
        if key < best_key:
            best, best_key = candidate, key
    return ratios, p_values, levels, best


def _tests_after(
    membership: Membership,
    tested: Iterable[int],
    splits: Iterable[Split],
    merges: Iterable[Merge],
    live: Iterable[int],
) -> tuple[tuple[int, int], ...]:
    """:attr:`Membership.tests` after this step: one more for each cluster in ``tested``
    (tested while it could split); both parts of a split start afresh; a merge keeps the
    larger count."""
    counts = dict(membership.tests)
    for c in tested:
        counts[c] = counts.get(c, 0) + 1
    for s in splits:
        counts.pop(s.parent, None)
        counts.pop(s.child, None)
    for m in merges:
        counts[m.kept] = max(counts.get(m.kept, 0), counts.pop(m.removed, 0))
    alive = set(live)
    return tuple(sorted((c, k) for c, k in counts.items() if k > 0 and c in alive))


def _apply_split(
    best: _Candidate, child: int, groups: dict[int, list[int]], assignment: dict[int, int]
) -> Split:
    """Step 2, the split: ``best``'s moved members leave its parent for cluster ``child``."""
    for i in best.moved:
        groups[best.parent].remove(i)
        assignment[i] = child
    groups[child] = list(best.moved)
    return Split(best.parent, child, best.moved, best.ratio, best.p_value)


def _undo_merge(distances: Distances, undo: tuple[int, int]) -> Merge:
    """Step 3 for a split under review that cost accuracy: merge ``(kept, removed)`` back;
    ``e`` is their centres' decoded distance, -1 when not both were measured this round."""
    kept, removed = undo
    col_of = {c: n for n, c in enumerate(c for c, _ in distances.refs.clusters)}
    e = (
        float(distances.centre[col_of[kept], col_of[removed]])
        if kept in col_of and removed in col_of
        else -1.0
    )
    return Merge(kept, removed, e, undo=True)


def secpc_step(
    distances: Distances,
    membership: Membership,
    config: ClusteringConfig,
    *,
    salt: str | None = None,
    undo: tuple[int, int] | None = None,
    frozen: frozenset[int] = frozenset(),
) -> StepResult:
    """The clustering step (module docstring); a pure function of its inputs.

    ``salt``: the public seed of the split rule's null draws (the coordinator passes the
    round's probe salt, :func:`crypto.refset_rules.probe_salt`; cluster ``c`` draws with
    ``f"{salt}|{c}"``). ``undo``: ``(parent, child)``, a split to merge back this round
    (step 3); ``frozen``: clusters that may not split this round.

    The result differs from ``membership`` by at most one split or one merge (and new
    participants joining), the change participants accept next round
    (:func:`crypto.refset_rules.check_membership_change`); its probes are empty (the next
    round draws them from its beacon). Its ``tests`` count the split tests each cluster
    has had; its ``watches`` and ``frozen`` are empty: the accuracy review keeps them
    (:func:`crypto.split_review.advance`).
    """
    assignment, groups = _assign(distances, membership)
    if undo is not None and not (undo[0] in groups and undo[1] in groups):
        raise ParameterError("undo", f"clusters {undo} must both exist to be merged back")
    ratios, p_values, levels, best_split = _test_splits(
        distances, groups, membership, config, salt, frozen
    )
    # A test spends budget only when its cluster could have split: not frozen, and a split
    # was possible this round (no undo, fewer than max_clusters), so a cluster held back
    # keeps its level (and its draws) instead of paying for tests that decided nothing.
    could_split = undo is None and len(groups) < config.max_clusters
    next_id = membership.next_id
    splits: list[Split] = []
    if could_split and best_split is not None:
        splits.append(_apply_split(best_split, next_id, groups, assignment))
        next_id += 1
    merges: list[Merge] = []
    merge = _undo_merge(distances, undo) if undo is not None else None
    if undo is None and not splits:
        merge = _spread_merge(distances, groups, config)
    if merge is not None:
        for i in groups.pop(merge.removed, []):
            assignment[i] = merge.kept
            groups[merge.kept].append(i)
        groups[merge.kept].sort()
        merges.append(merge)

    # 4. drop empty clusters.
    clusters = tuple((c, tuple(sorted(m))) for c, m in sorted(groups.items()) if m)
    counted = [c for c in levels if c not in frozen] if could_split else []
    tests = _tests_after(membership, counted, splits, merges, (c for c, _ in clusters))
    new_membership = Membership(clusters, (), next_id, tests=tests)
    return StepResult(
        new_membership, assignment, tuple(splits), tuple(merges), ratios, p_values, levels
    )


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
