"""SecPC distance stage on Lagrange-coded shares (docs/protocol.md, "Distance stage").

Reference sets of one round (:class:`ReferenceSets`): the clusters ``M_c`` and, for some
clusters, one *probe* ``P_c``: a proper subset of ``M_c`` (DESIGN.md section 4 used a
singleton candidate ``{k}`` here; a probe has at least ``min_reference_size`` members, and
so has ``M_c \\ P_c``, so no centre the coordinator learns a distance to is one
participant's prompt). Participant ``j`` holds ``share_j(x_i)`` (length ``L = ceil(r/K)``;
the distance stage uses ``K = 1``, so ``L = r`` and the decoded value is the whole squared
distance, never a per-chunk partial sum) for every participant ``i`` and computes, mod p,

* ``delta_j(i, S) = sum_l (m_S * share_j(x_i)_l - Sum_j(S)_l)**2`` for every ``i`` and
  reference set ``S`` of size ``m_S``, where ``Sum_j(S) = sum_{i' in S} share_j(x_i')``;
* ``eps_j(c, c') = sum_l (m_c' * Sum_j(c)_l - m_c * Sum_j(c')_l)**2`` for clusters
  ``c < c'``.

Both are degree-2 polynomials in the shares, so the coordinator decodes them from
``2(K+T-1)+1`` results, lifts each value to an integer and rescales (for a code with
``K > 1``, which :class:`~crypto.params.CryptoParams` refuses for this stage, the ``K``
chunk values would be summed here, after the coordinator had seen each of them):
``D[i, S] = dec / (s**2 * m_S**2)`` is the squared distance of ``x_i`` to the centre
(mean) of ``S``; ``E[c, c'] = dec / (s**2 * m_c**2 * m_c'**2)`` the squared
centre-centre distance. Units: squared distances in the real (dequantized) space.

The result vector a participant uploads is laid out as ``delta`` row-major over
(participants x reference sets), then ``eps`` over cluster pairs ``(c, c')``, ``c < c'``
in the announced order (:attr:`ReferenceSets.result_length`).

:func:`plaintext_distances` computes the same table from real vectors: the reference
path the tests compare with.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.errors import DecodeError, OffsetCheckError, ParameterError
from secfpp.crypto.field import FieldArray, PrimeField
from secfpp.crypto.lcc import Decoded, LagrangeCode
from secfpp.crypto.linalg import matmul, mul, mulsum
from secfpp.crypto.params import FieldSpec

__all__ = [
    "Distances",
    "ReferenceSets",
    "centres_from_points",
    "coded_distances",
    "decode_distances",
    "offset_failures",
    "plaintext_distances",
]


@dataclass(frozen=True)
class ReferenceSets:
    """What the coordinator asks for in one distance stage.

    Attributes:
        participants: the ``i`` whose distances are wanted (those who shared), sorted.
        clusters: ``(cluster id, members)`` in increasing id order; members sorted.
        probes: ``(cluster id, members)``: a proper subset of that cluster whose centre
            gives the split test its axis (:mod:`crypto.clustering`); members sorted.
        contributors: the participants whose zero-sharing re-randomizes the results
            (:mod:`crypto.rerandomize`, "Who contributes"), sorted: participants who
            shared this round (not necessarily rows of the request: a member of a cluster
            too small to measure still contributes); None: every participant (requests of
            earlier releases, and every request with distance-stage noise).
    """

    participants: tuple[int, ...]
    clusters: tuple[tuple[int, tuple[int, ...]], ...]
    probes: tuple[tuple[int, tuple[int, ...]], ...] = ()
    contributors: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if list(self.participants) != sorted(set(self.participants)):
            raise ParameterError("participants", "must be sorted and without repeats")
        if not self.clusters:
            raise ParameterError("clusters", "must name at least one cluster")
        ids = [c for c, _ in self.clusters]
        if ids != sorted(set(ids)):
            raise ParameterError("clusters", "must be in increasing id order without repeats")
        present = set(self.participants)
        for c, members in self.clusters:
            if not members:
                raise ParameterError("clusters", f"cluster {c} is empty")
            if not set(members) <= present:
                raise ParameterError("clusters", f"cluster {c} names members that did not share")
        clusters = dict(self.clusters)
        for c, members in self.probes:
            if c not in clusters:
                raise ParameterError("probes", f"probe of unknown cluster {c}")
            if list(members) != sorted(set(members)) or not members:
                raise ParameterError("probes", f"probe of cluster {c} must be sorted, non-empty")
            if not set(members) < set(clusters[c]):
                raise ParameterError(
                    "probes", f"probe of cluster {c} must be a proper subset of its members"
                )
        if self.contributors is not None and list(self.contributors) != sorted(
            set(self.contributors)
        ):
            raise ParameterError("contributors", "must be sorted and without repeats")

    @property
    def zero_contributors(self) -> tuple[int, ...]:
        """Whose zero-sharings a recipient adds (and whose offset checks follow the
        outputs): :attr:`contributors`, or every participant when that is None."""
        return self.participants if self.contributors is None else self.contributors

    @property
    def sets(self) -> list[tuple[int, ...]]:
        """Member tuples of every reference set: clusters first, then probes."""
        return [m for _, m in self.clusters] + [m for _, m in self.probes]

    @property
    def cluster_pairs(self) -> list[tuple[int, int]]:
        """Index pairs ``(a, b)``, ``a < b``, into :attr:`clusters`."""
        return list(itertools.combinations(range(len(self.clusters)), 2))

    @property
    def result_length(self) -> int:
        """Length of one participant's result vector."""
        return len(self.participants) * len(self.sets) + len(self.cluster_pairs)


@dataclass(frozen=True)
class Distances:
    """Decoded (or plaintext) SecPC distances; squared, in real units.

    Attributes:
        refs: the reference sets they answer.
        point: ``D``, shape (len(participants), len(sets)): ``D[i, S]``.
        centre: ``E``, shape (C, C), symmetric with zero diagonal.
    """

    refs: ReferenceSets
    point: NDArray[np.float64]
    centre: NDArray[np.float64]

    def row(self, participant: int) -> int:
        """Row of ``participant`` in :attr:`point`."""
        return self.refs.participants.index(participant)


def _membership(refs: ReferenceSets) -> NDArray[np.int64]:
    index = {p: n for n, p in enumerate(refs.participants)}
    matrix = np.zeros((len(refs.sets), len(refs.participants)), dtype=np.int64)
    for s, members in enumerate(refs.sets):
        for m in members:
            matrix[s, index[m]] = 1
    return matrix


def _stack_checked(
    field: PrimeField, shares: Mapping[int, FieldArray], order: Sequence[int]
) -> FieldArray:
    """The shares of ``order`` as the rows of one int64 matrix, all entries in ``[0, p)``.

    One range check over the matrix; when it fails, the rows are checked one by one so
    that the error names the offending ``shares[i]``.
    """
    rows = [np.asarray(shares[i]) for i in order]
    if all(np.issubdtype(r.dtype, np.integer) for r in rows):
        stacked = np.vstack(rows).astype(np.int64, copy=False)
        if stacked.size == 0 or (int(stacked.min()) >= 0 and int(stacked.max()) < field.prime):
            return stacked
    return np.vstack([field.check(shares[i], f"shares[{i}]") for i in order])


def coded_distances(
    field: PrimeField,
    shares: Mapping[int, FieldArray],
    refs: ReferenceSets,
    *,
    centre_pairs: bool = True,
) -> FieldArray:
    """Participant ``j``'s result vector from its shares ``share_j(x_i)`` (see module doc).

    Args:
        field: the clustering field.
        shares: participant ``i`` -> ``share_j(x_i)``, each of length ``L``; must cover
            ``refs.participants``.
        centre_pairs: ``False`` (distance-stage DP noise, :mod:`crypto.dp.distance`): the
            centre-centre slots are 0, so they release nothing; :func:`decode_distances`
            then derives ``E`` from ``D`` (post-processing), since every cluster's members
            are present: ``E[a, b] = mean_{i in a} D[i, b] - mean_{i in a} D[i, a]``.
    Returns:
        field elements, length :attr:`ReferenceSets.result_length`.
    """
    missing = [i for i in refs.participants if i not in shares]
    if missing:
        raise ParameterError("shares", f"lacks the shares of participants {missing}")
    own = _stack_checked(field, shares, refs.participants)  # (n, L)
    p = field.prime
    sums = matmul(field, _membership(refs), own)  # (S, L)
    sizes = np.array([len(m) for m in refs.sets], dtype=np.int64)  # m_S <= n, so m_S**2 fits
    # delta(i, S) = m_S**2 |x_i|**2 - 2 m_S <x_i, Sum(S)> + |Sum(S)|**2: one (n, L) x (L, S)
    # product instead of n * S * L products (same value mod p, term for term).
    norms = mulsum(own, own, p)  # (n,)
    inner = matmul(field, own, np.ascontiguousarray(sums.T))  # (n, S)
    sum_norms = mulsum(sums, sums, p)  # (S,)
    first = mul(norms[:, None], np.mod(sizes * sizes, p)[None, :], p)
    cross = mul(inner, np.mod(2 * sizes, p)[None, :], p)
    delta = field.add(field.sub(first, cross), np.broadcast_to(sum_norms[None, :], first.shape))
    eps = []
    clusters = refs.clusters
    for a, b in refs.cluster_pairs if centre_pairs else ():
        m_a, m_b = len(clusters[a][1]), len(clusters[b][1])
        pair = field.sub(field.scale(sums[a], m_b), field.scale(sums[b], m_a))
        eps.append(int(mulsum(pair, pair, p)))
    if not centre_pairs:
        eps = [0] * len(refs.cluster_pairs)
    return np.concatenate([delta.reshape(-1), np.asarray(eps, dtype=np.int64)])


def decode_distances(
    code: LagrangeCode,
    results: Mapping[int, FieldArray],
    refs: ReferenceSets,
    spec: FieldSpec,
    *,
    noisy: bool = False,
    checked: Sequence[int] = (),
) -> tuple[Distances, Decoded]:
    """Decode participants' result vectors into :class:`Distances` (module doc, step 3).

    ``checked``: the contributors whose offset-check values follow the outputs in every
    result vector (:func:`crypto.rerandomize.checked_distances`, in this order); they are
    decoded with the outputs, and :class:`~crypto.errors.OffsetCheckError` names every
    contributor whose check is not zero at the data point (its contribution shifted the
    distances), before any distance is returned.

    ``noisy``: the results carry distance-stage DP noise (:mod:`crypto.dp.distance`), so a
    small distance may decode below zero; it is clamped to 0 (post-processing) instead of
    being taken for a wrapped field (the noise's headroom is checked at configuration).
    The participants then release no centre-centre values (``centre_pairs=False`` in
    :func:`coded_distances`): ``E`` is derived from the noisy ``D``,
    ``E[a, b] = (mean_{i in a} (D[i, b] - D[i, a]) + mean_{i in b} (D[i, a] - D[i, b])) / 2``
    (each half is exact without noise: ``mean_{i in a} |x_i - c_b|^2 = |c_a - c_b|^2 +
    mean_{i in a} |x_i - c_a|^2``), clamped at 0.
    """
    decoded = code.decode(results, degree=2)
    expected = refs.result_length + len(checked)
    if decoded.values.shape[1] != expected:
        got = decoded.values.shape[1]
        raise DecodeError(f"result vectors have {got} values, expected {expected}")
    if checked:
        failed = offset_failures(decoded.values[:, refs.result_length :], checked)
        decoded = Decoded(decoded.values[:, : refs.result_length], decoded.used, decoded.rejected)
        if failed:
            raise OffsetCheckError(failed, decoded)
    lifted = code.field.centered(decoded.values)
    if noisy:
        lifted = np.maximum(lifted, 0)
    elif (lifted < 0).any():
        raise DecodeError("a decoded squared distance is negative: the field wrapped")
    totals = np.sum(lifted.astype(object), axis=0)  # exact: K chunk values below (p-1)/2
    n_sets = len(refs.sets)
    n_points = len(refs.participants) * n_sets
    s2 = float(spec.scale) ** 2
    sizes = np.array([len(m) for m in refs.sets], dtype=np.float64)
    point = totals[:n_points].astype(np.float64).reshape(len(refs.participants), n_sets)
    point /= s2 * sizes[None, :] ** 2
    n_c = len(refs.clusters)
    centre = np.zeros((n_c, n_c), dtype=np.float64)
    if noisy:
        return Distances(refs, point, centres_from_points(refs, point)), decoded
    for value, (a, b) in zip(totals[n_points:], refs.cluster_pairs, strict=True):
        m_a, m_b = len(refs.clusters[a][1]), len(refs.clusters[b][1])
        centre[a, b] = centre[b, a] = float(value) / (s2 * (m_a * m_b) ** 2)
    return Distances(refs, point, centre), decoded


def offset_failures(decoded: FieldArray, contributors: Sequence[int]) -> tuple[int, ...]:
    """The contributors whose decoded offset check (:mod:`crypto.rerandomize`) is not zero
    at every data point.

    Args:
        decoded: the decoded check values, shape (K, len(contributors)): ``c_i(beta_k)``.
        contributors: in the order of the columns.
    """
    values = np.asarray(decoded)
    if values.ndim != 2 or values.shape[1] != len(contributors):
        raise ParameterError(
            "decoded", f"must have shape (K, {len(contributors)}), not {values.shape}"
        )
    return tuple(i for i, col in zip(contributors, values.T, strict=True) if np.any(col != 0))


def centres_from_points(refs: ReferenceSets, point: NDArray[np.float64]) -> NDArray[np.float64]:
    """``E`` (C, C) derived from ``D`` (see :func:`decode_distances`, ``noisy``), clamped at 0.

    ``E[a, b] = (mean_{i in a} (D[i, b] - D[i, a]) + mean_{i in b} (D[i, a] - D[i, b])) / 2``;
    exact without noise because every cluster's members are rows of ``D``.
    """
    rows = {p: n for n, p in enumerate(refs.participants)}
    n_c = len(refs.clusters)
    centre = np.zeros((n_c, n_c), dtype=np.float64)
    for a, b in refs.cluster_pairs:
        in_a = [rows[p] for p in refs.clusters[a][1]]
        in_b = [rows[p] for p in refs.clusters[b][1]]
        via_a = float(np.mean(point[in_a, b] - point[in_a, a]))
        via_b = float(np.mean(point[in_b, a] - point[in_b, b]))
        centre[a, b] = centre[b, a] = max(0.0, (via_a + via_b) / 2.0)
    return centre


def plaintext_distances(
    vectors: Mapping[int, NDArray[np.float64]] | Sequence[NDArray[np.float64]],
    refs: ReferenceSets,
) -> Distances:
    """The same :class:`Distances` computed directly from real vectors ``x_i`` (shape (r,))."""
    rows = np.vstack([np.asarray(vectors[i], dtype=np.float64) for i in refs.participants])
    index = {p: n for n, p in enumerate(refs.participants)}
    centres = np.vstack([rows[[index[m] for m in members]].mean(axis=0) for members in refs.sets])
    point = ((rows[:, None, :] - centres[None, :, :]) ** 2).sum(axis=-1)
    n_c = len(refs.clusters)
    centre = np.zeros((n_c, n_c), dtype=np.float64)
    for a, b in refs.cluster_pairs:
        centre[a, b] = centre[b, a] = float(((centres[a] - centres[b]) ** 2).sum())
    return Distances(refs, point, centre)
