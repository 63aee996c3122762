"""Re-randomizing the decoded product polynomial with a zero-sharing (docs/protocol.md,
"Distance stage", "Re-randomization").

**Problem.** A degree-2 computation on Lagrange shares gives participant ``j`` the value
``h(alpha_j)`` of ``h(z) = f(u_1(z), .., u_n(z))``, a polynomial of degree
``d = 2(K+T-1)`` (``2T`` in the distance stage, ``K = 1``). The coordinator interpolates
the whole of ``h`` from ``d + 1`` results, so it sees not only ``h(beta_1..beta_K)`` (the
distances) but every coefficient of ``h``, and those mix data and masks: for one
coordinate (``r = 1``) ``h = (m u_i - U_S)**2`` is a perfect square, so all its other
evaluations are quadratic residues; with colluders the cross terms
``<U_S(alpha_c), sum_S x>`` give linear measurements of an honest sum.

**Fix.** Every contributor ``i`` draws, for each output ``o`` (a vector of length ``m``),
an independent polynomial ``rho_{i,o}`` uniform among those of degree ``<= d`` with
``rho_{i,o}(beta_k) = 0`` for ``k = 1..K`` (the zero-sharing), and sends recipient ``j``
its value ``rho_{i,o}(alpha_j)`` sealed like every share. Recipient ``j`` uploads
``h_o(alpha_j) + sum_{i in C} rho_{i,o}(alpha_j)``. The results lie on
``H_o = h_o + rho_o``, ``rho_o = sum_{i in C} rho_{i,o}``, of the same degree ``d``, so

* ``H_o(beta_k) = h_o(beta_k)``: decoding gives the same distances, exactly;
* the results still form a Reed-Solomon codeword of dimension ``d + 1``: the
  error-correcting decode corrects wrong results as before;
* if one contributor in ``C`` is honest, ``rho_o`` is uniform on the space ``V`` of
  polynomials of degree ``<= d`` vanishing at ``beta_1..beta_K`` (a uniform element plus
  an independent one), so ``H_o`` is uniform among the polynomials of degree ``<= d``
  with the true values at the data points. With ``T`` colluding recipients, who also know
  their own ``rho_{i,o}(alpha_c)``, the honest part of ``rho_o`` is still uniform on the
  coset of ``{rho in V : rho(alpha_c) = 0 for the colluders' points}``, of dimension
  ``d + 1 - K - T >= T``: ``H_o`` is uniform given its values at the data points and at
  the colluders' points, which the colluders computed themselves from shares that are
  independent of the data. Nothing else is learned.

**Who contributes (the design choice).** ``C`` is the request's
:attr:`~crypto.secpc.ReferenceSets.zero_contributors`: every participant the request lists as
present (``participants``), or, when the request names ``contributors``, those, a subset of
the present participants of at least ``T + 1`` (:func:`contributor_floor`, ``T`` the
colluders among all participants; with a committee not its ``T_c``). Either way at least
one contributor is honest: with every present participant contributing, a participant whose
data are in the outputs has itself contributed (the coordinator cannot strip honest
contributors without stripping their data); with a named subset, any ``T + 1`` distinct
participants include one outside the coalition, which is the threat model's assumption
(the coded shares themselves rest on it). A recipient refuses a named subset below the
floor (``too_few_contributors``), so the coordinator cannot pick colluders only. Since
2026-11-29 the coordinator asks only ``T + 1 + D`` participants per round to contribute
(``D`` the dropouts the round tolerates, :func:`contributors_wanted`; a different subset
each round), which cuts the re-randomization's traffic by ``N / (T + 1 + D)`` (5x at
``N = 1,000`` with ``T = D = 100``) without weakening the guarantee; a committee round
asks fewer still, a sample drawn with its beacon (:mod:`crypto.contributor_sample`, whose
guarantee is the committee's ``2**-40`` bound). A contribution travels
with the share in the sharing stage, so every recipient that answers adds the same ``C``
whatever subset of recipients answers (dropouts). Because the number of outputs is only
known at the distance stage, each contribution is sized by a public bound
(:func:`output_bound`, or the round's own) and the recipient uses its first
``result_length`` entries (the first entries of independent uniform zero-sharings are
independent uniform zero-sharings).

**Offset check (integrity).** A recipient cannot see that a contribution vanishes at the
data points: a malicious contributor's polynomial of the right degree with another value there
would shift every output by that value and still give a codeword. So every contribution carries
one more output, a check mask ``rho_{i,*}`` (its last entry, :func:`contribution_length`), and
the distance request a fresh public challenge, drawn by the coordinator after every
contribution was sealed and expanded to weights ``r_0 .. r_{m-1}`` (:func:`challenge_weights`).
Recipient ``j`` appends, per contributor ``i`` (``C``, in order),
``c_i(alpha_j) = sum_o r_o rho_{i,o}(alpha_j) + rho_{i,*}(alpha_j)`` to its results
(:func:`offset_checks`): ``n`` more values, each on a polynomial ``c_i`` of degree ``<= d``,
decoded (and error-corrected) with the outputs. An honest ``c_i`` vanishes at ``beta_k``; a
contribution with values ``delta_{i,o}`` at the data point gives ``c_i(beta_k) = sum_o r_o
delta_{i,o} + rho_{i,*}(beta_k)``, which is zero for a fixed nonzero ``delta`` and mask with
probability ``1/p`` over the challenge (the weights come after the contribution is fixed), so
the coordinator names every such contributor (:func:`crypto.secpc.offset_failures`). Nothing
leaks: for an honest ``i`` the mask is uniform on ``V`` and independent of ``rho_{i,o}``, so
``c_i`` is uniform on ``V`` (given the colluders' own values, uniform on the same coset as
above). With
distance-stage DP noise the values at the data point are the noise, so no challenge is sent
and nothing is checked (docs/protocol.md section 9).

**Seeded contributions** (:meth:`ZeroSharing.contribute_seeded`, what participants send):
the ``F`` free evaluations need not travel. Recipient ``j < F`` gets a fresh 32-byte seed
(sealed) and expands it to ``rho(alpha_j)`` with :func:`expand_seed` (an AES-256-CTR
stream, :class:`crypto.rng.SeedStream`); the contributor expands the same seeds and derives
the other ``N - F`` evaluations from them, which travel as vectors. The polynomial is then
pseudorandom instead of uniform on ``V`` (a computational guarantee, the one the sealing
of every share already rests on), and a contribution costs ``(N - F) m`` elements plus
``F`` seeds instead of ``N m`` elements: ``F = 2 T_c`` is about 0.6 to 0.75 of the points
(0.62 at N = 100, 0.75 with N = 1,000's committee of 379), so 2.6x to 4x less traffic.

**Drawing a zero-sharing** (:meth:`ZeroSharing.contribute`): like
:meth:`crypto.lcc.LagrangeCode.share`, fix ``F = d + 1 - K`` evaluations uniformly at
random, ``rho(alpha_0..alpha_{F-1})``, and get the others by Lagrange interpolation through
``beta_1..beta_K`` (value 0) and those ``F`` points: ``rho(alpha_j) = M[j] @ Z`` with
``M[j, f] = l_{K+f}(alpha_{F+j})``. For fixed zeros at the data points the map from ``rho``
to ``Z`` is a bijection (``d + 1`` distinct nodes), so uniform ``Z`` is uniform ``rho`` on
``V``. Shapes: ``Z`` (F, m), ``M`` (n-F, F), result (n, m); cost ``(n - F) F m``
multiplications per contributor.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.errors import ParameterError
from secfpp.crypto.field import FieldArray, PrimeField
from secfpp.crypto.lcc import LagrangeCode
from secfpp.crypto.linalg import field_sum, lagrange_matrix, matmul, times_pow2
from secfpp.crypto.rng import RandomSource, SeedStream
from secfpp.crypto.secpc import ReferenceSets, coded_distances

__all__ = [
    "CHALLENGE_SIZE",
    "SEED_SIZE",
    "SeededContribution",
    "ZeroSharing",
    "challenge_weights",
    "checked_distances",
    "contribution_length",
    "contributor_floor",
    "contributors_wanted",
    "dropouts_of",
    "expand_seed",
    "offset_checks",
    "output_bound",
    "rerandomize",
    "rerandomized_distances",
    "sum_and_checks",
]


def output_bound(n_participants: int, max_clusters: int) -> int:
    """Public bound on a distance request's :attr:`~crypto.secpc.ReferenceSets.result_length`.

    ``n <= N`` present participants, ``C <= max_clusters`` clusters and at most one probe
    per cluster: ``n (C + P) + C (C - 1) / 2 <= N * 2 C_max + C_max (C_max - 1) / 2``.
    """
    for name, value in (("n_participants", n_participants), ("max_clusters", max_clusters)):
        if not isinstance(value, int) or value < 1:
            raise ParameterError(name, f"must be an int >= 1, not {value!r}")
    return n_participants * 2 * max_clusters + max_clusters * (max_clusters - 1) // 2


def contribution_length(n_participants: int, max_clusters: int) -> int:
    """Entries of one zero-sharing contribution: the :func:`output_bound` outputs, then the
    check mask of the offset check (module doc), always the last entry."""
    return output_bound(n_participants, max_clusters) + 1


SEED_SIZE = 32
"""Bytes of the seed that stands for a free evaluation (:func:`expand_seed`)."""

_SEED_LABEL = b"zero-sharing"


def contributor_floor(colluders: int) -> int:
    """``T + 1``: the fewest contributors a request that names them may list, so that one
    of them is outside a coalition of ``colluders`` participants (module doc, "Who
    contributes")."""
    if isinstance(colluders, bool) or not isinstance(colluders, int) or colluders < 0:
        raise ParameterError("colluders", f"must be an integer >= 0, not {colluders!r}")
    return colluders + 1


def contributors_wanted(n_participants: int, colluders: int, dropouts: int) -> int:
    """``min(n, T + 1 + D)``: how many of a round's ``n`` participants are asked to
    contribute, so that at least :func:`contributor_floor` remain after ``D`` of them drop
    out (or refuse) in the sharing stage."""
    for name, value in (("n_participants", n_participants), ("dropouts", dropouts)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ParameterError(name, f"must be an integer >= 0, not {value!r}")
    return min(n_participants, contributor_floor(colluders) + dropouts)


def dropouts_of(n: int, missing: int, points: int) -> int:
    """``D = ceil(n missing / points)``: how many of ``n`` contributors may miss the sharing
    stage when the distance stage tolerates ``missing`` of its code's ``points`` (the
    fraction of code points the round may lose, applied to its contributors)."""
    for name, value in (("n", n), ("missing", missing)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ParameterError(name, f"must be an integer >= 0, not {value!r}")
    if isinstance(points, bool) or not isinstance(points, int) or points < 1:
        raise ParameterError("points", f"must be an integer >= 1, not {points!r}")
    return -(-n * missing // points)


def expand_seed(seed: bytes, prime: int, length: int) -> FieldArray:
    """The ``length`` elements of GF(prime) a seed stands for: ``rho_o(alpha_j)`` for the
    outputs ``o = 0..length-1`` of a free point ``j`` (:meth:`ZeroSharing.contribute_seeded`).

    Raises:
        ParameterError: the seed is not :data:`SEED_SIZE` bytes or ``length`` is not >= 1.
    """
    return _stream_elements(seed, "seed", _SEED_LABEL, prime, length)


def _stream_elements(key: bytes, name: str, label: bytes, prime: int, length: int) -> FieldArray:
    """``length`` elements of GF(prime) from the :class:`~crypto.rng.SeedStream` of a
    32-byte ``key`` under ``label``; ``name`` is the argument an error names."""
    if not isinstance(key, bytes) or len(key) != SEED_SIZE:
        raise ParameterError(name, f"must be {SEED_SIZE} bytes")
    if not isinstance(length, int) or length < 1:
        raise ParameterError("length", f"must be an int >= 1, not {length!r}")
    return SeedStream(key, label=label).field_elements(prime, (length,))


@dataclass(frozen=True, eq=False)
class SeededContribution:
    """One contributor's zero-sharing with its free evaluations as seeds.

    Attributes:
        seeds: for the points ``alpha_0 .. alpha_{S-1}`` (``S`` =
            :attr:`ZeroSharing.seeded_points`): the seed whose :func:`expand_seed` is the
            contribution's value there.
        derived: shape (N - S, length): the values at ``alpha_S .. alpha_{N-1}``.
    """

    seeds: tuple[bytes, ...]
    derived: FieldArray

    def __repr__(self) -> str:  # never show a seed
        return f"SeededContribution({len(self.seeds)} seeds, derived {self.derived.shape})"


@dataclass(frozen=True, eq=False)
class ZeroSharing:
    """Zero-sharings for a degree-``degree`` computation on ``code``'s shares (module doc).

    Attributes:
        code: the code the computation runs on (its ``N`` points ``alpha_j`` are the
            recipients; in a committee round, the committee's code).
        degree: ``deg f`` (2 for squared distances).
    """

    code: LagrangeCode
    degree: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.degree, int) or self.degree < 1:
            raise ParameterError("degree", f"must be an int >= 1, not {self.degree!r}")

    @property
    def poly_degree(self) -> int:
        """``d = degree * (K + T - 1)``: the degree of the decoded polynomial."""
        return self.degree * (self.code.k + self.code.t - 1)

    @property
    def free(self) -> int:
        """``F = d + 1 - K``: evaluations drawn at random (the dimension of ``V``)."""
        return self.poly_degree + 1 - self.code.k

    @cached_property
    def _drawn(self) -> int:
        return min(self.free, self.code.n)

    @property
    def seeded_points(self) -> int:
        """``S = min(F, N)``: the points ``alpha_0 .. alpha_{S-1}`` whose values are free
        (drawn, or sent as seeds); the others are derived from them."""
        return self._drawn

    def split(self, point: Mapping[int, int]) -> tuple[list[int], list[int]]:
        """The recipients that get a contribution as a seed (code point below
        :attr:`seeded_points`) and those that get a vector; ``point`` maps each recipient to
        its code point (its committee position, or itself). Both sides derive it so."""
        seeds = sorted(r for r, k in point.items() if k < self._drawn)
        vectors = sorted(r for r, k in point.items() if k >= self._drawn)
        return seeds, vectors

    @cached_property
    def interpolation(self) -> FieldArray:
        """``M`` (N - F, F): ``rho(alpha_F..alpha_{N-1}) = M @ rho(alpha_0..alpha_{F-1})``."""
        code = self.code
        nodes = code.betas[: code.k] + tuple(code.alpha(j) for j in range(self._drawn))
        targets = [code.alpha(j) for j in range(self._drawn, code.n)]
        full = lagrange_matrix(nodes, targets, code.field.prime)
        return np.ascontiguousarray(full[:, code.k :])  # the data points' columns multiply 0

    @cached_property
    def data_interpolation(self) -> FieldArray:
        """``M_beta`` (N - F, K): the data points' columns of the full interpolation matrix
        (what a nonzero value at ``beta_k`` contributes to the derived evaluations)."""
        code = self.code
        nodes = code.betas[: code.k] + tuple(code.alpha(j) for j in range(self._drawn))
        targets = [code.alpha(j) for j in range(self._drawn, code.n)]
        full = lagrange_matrix(nodes, targets, code.field.prime)
        return np.ascontiguousarray(full[:, : code.k])

    def contribute(
        self, length: int, rng: RandomSource, *, values: NDArray[np.int64] | None = None
    ) -> FieldArray:
        """One contributor's sharing of ``length`` outputs: row ``j`` goes to ``alpha_j``.

        Args:
            length: outputs ``m``.
            rng: the source of the ``F`` free evaluations.
            values: ``None`` for a zero-sharing; otherwise the polynomials' values at the
                data point, shape (length,) (``K = 1``, the distance stage) or (K, length),
                integers (signed: a negative value ``v`` stands for ``p + v``). Distributed
                DP noise on the distances (:mod:`crypto.dp.distance`) passes its discrete
                Gaussian share here; the free evaluations are drawn the same way, so the
                polynomial is uniform among those of degree ``<= d`` with these values.
        Returns:
            field elements, shape (N, length): ``rho_o(alpha_j)`` for each output ``o``.
        """
        at_data = self._at_data(length, values)
        field = self.code.field
        drawn = rng.field_elements(field.prime, (self._drawn, length))
        out = np.empty((self.code.n, length), dtype=np.int64)
        out[: self._drawn] = drawn
        out[self._drawn :] = self._derive(drawn, at_data)
        return out

    def _at_data(self, length: int, values: NDArray[np.int64] | None) -> FieldArray | None:
        """``values`` checked and reduced mod p, shape (K, length); None for zeros."""
        if not isinstance(length, int) or length < 1:
            raise ParameterError("length", f"must be an int >= 1, not {length!r}")
        field = self.code.field
        at_data: FieldArray | None = None
        if values is not None:
            raw = np.asarray(values)
            if raw.ndim == 1:
                raw = raw[None, :]
            if raw.shape != (self.code.k, length) or not np.issubdtype(raw.dtype, np.integer):
                raise ParameterError(
                    "values",
                    f"must be integers of shape ({length},) or ({self.code.k}, {length}), not "
                    f"{raw.dtype} {raw.shape}",
                )
            at_data = np.mod(raw.astype(np.int64), field.prime)
            if self._drawn >= self.code.n:
                raise ParameterError(
                    "values",
                    f"a degree-{self.poly_degree} polynomial on {self.code.n} points "
                    "has no derived evaluation to carry them",
                )
        return at_data

    def contribute_seeded(
        self, length: int, rng: RandomSource, *, values: NDArray[np.int64] | None = None
    ) -> SeededContribution:
        """:meth:`contribute` with the free evaluations sent as seeds (module doc).

        The value at ``alpha_j``, ``j < S``, is ``expand_seed(seeds[j], p, length)``; the
        rows of ``derived`` are the values at ``alpha_S .. alpha_{N-1}``. ``values`` as in
        :meth:`contribute`. Returns the same polynomial :meth:`contribute` would for free
        evaluations equal to the expanded seeds.
        """
        at_data = self._at_data(length, values)
        prime = self.code.field.prime
        seeds = tuple(rng.random_bytes(SEED_SIZE) for _ in range(self._drawn))
        drawn = np.empty((self._drawn, length), dtype=np.int64)
        for row, seed in enumerate(seeds):
            drawn[row] = expand_seed(seed, prime, length)
        return SeededContribution(seeds, self._derive(drawn, at_data))

    def _derive(self, drawn: FieldArray, at_data: FieldArray | None) -> FieldArray:
        """The values at the derived points from the free ones (and those at the data
        points, zero when ``at_data`` is None): shape (N - S, length)."""
        field = self.code.field
        if self._drawn >= self.code.n:
            return np.empty((0, drawn.shape[1]), dtype=np.int64)
        derived = matmul(field, self.interpolation, drawn)
        if at_data is not None:
            derived = field.add(derived, matmul(field, self.data_interpolation, at_data))
        return derived


def rerandomize(
    field: PrimeField,
    coded: FieldArray,
    contributions: Mapping[int, FieldArray],
    contributors: Sequence[int],
) -> FieldArray:
    """``coded + sum_{i in contributors} contributions[i][:len(coded)] mod p``.

    Args:
        coded: this recipient's result vector ``h_o(alpha_j)``, length ``m``.
        contributions: contributor -> the zero-sharing values it sent this recipient,
            each of length ``>= m`` (sized by :func:`output_bound`).
        contributors: whose contributions count (``ReferenceSets.zero_contributors``).
    Raises:
        ParameterError: a contributor's value is missing, too short, or not in GF(p).
    """
    missing = [i for i in contributors if i not in contributions]
    if missing:
        raise ParameterError("contributions", f"lacks the zero-sharings of {missing}")
    length = coded.shape[0]
    rows = []
    for i in contributors:
        row = np.asarray(contributions[i])
        if row.ndim != 1 or row.shape[0] < length:
            raise ParameterError(
                f"contributions[{i}]",
                f"must be a vector of at least {length} values, not shape {row.shape}",
            )
        rows.append(row[:length])
    if not rows:
        return coded.copy()
    stacked = np.vstack(rows)  # (contributors, m)
    if not np.issubdtype(stacked.dtype, np.integer) or (
        stacked.size and (int(stacked.min()) < 0 or int(stacked.max()) >= field.prime)
    ):
        for i, row in zip(contributors, rows, strict=True):  # name the offending contributor
            field.check(row, f"contributions[{i}]")
    total = field_sum(stacked.astype(np.int64, copy=False).T, field.prime)
    return field.add(field.check(coded, "coded"), total)


def rerandomized_distances(
    field: PrimeField,
    shares: Mapping[int, FieldArray],
    contributions: Mapping[int, FieldArray],
    refs: ReferenceSets,
    *,
    centre_pairs: bool = True,
) -> FieldArray:
    """:func:`~crypto.secpc.coded_distances` plus every present participant's zero-sharing.

    The contributors are ``refs.zero_contributors`` (module doc, "Who contributes").
    ``centre_pairs=False`` with distance-stage DP noise (see ``coded_distances``).
    """
    coded = coded_distances(field, shares, refs, centre_pairs=centre_pairs)
    return rerandomize(field, coded, contributions, refs.zero_contributors)


CHALLENGE_SIZE = SEED_SIZE
"""Bytes of a distance request's offset-check challenge (:func:`challenge_weights`)."""

_CHALLENGE_LABEL = b"offset-check"


def challenge_weights(challenge: bytes, prime: int, length: int) -> FieldArray:
    """The weights ``r_0 .. r_{length-1}`` in GF(prime) of an offset-check challenge.

    The challenge is public (the distance request carries it in hex); the weights are its
    AES-256-CTR expansion under its own label, so they are fixed by the request and
    unpredictable before the coordinator draws it.

    Raises:
        ParameterError: the challenge is not :data:`CHALLENGE_SIZE` bytes or ``length`` < 1.
    """
    return _stream_elements(challenge, "challenge", _CHALLENGE_LABEL, prime, length)


def offset_checks(
    field: PrimeField,
    contributions: Mapping[int, FieldArray],
    contributors: Sequence[int],
    weights: FieldArray,
) -> FieldArray:
    """This recipient's check values: ``c_i = sum_o weights[o] rho_{i,o} + rho_{i,*}``.

    Args:
        contributions: contributor -> the values it sent this recipient, the outputs then
            the check mask (last entry); each longer than ``len(weights)``.
        contributors: whose checks, in this order (``ReferenceSets.zero_contributors``).
        weights: ``r``, shape (m,), ``m`` the request's ``result_length``.
    Returns:
        field elements, shape (len(contributors),).
    Raises:
        ParameterError: a contribution is missing, too short, or not in GF(p).
    """
    return sum_and_checks(field, contributions, contributors, weights)[1]


def checked_distances(
    field: PrimeField,
    shares: Mapping[int, FieldArray],
    contributions: Mapping[int, FieldArray],
    refs: ReferenceSets,
    challenge: bytes,
) -> FieldArray:
    """:func:`rerandomized_distances` followed by :func:`offset_checks` for the request's
    contributors: shape (``refs.result_length + len(refs.zero_contributors)``,)."""
    coded = coded_distances(field, shares, refs)
    m = refs.result_length
    weights = challenge_weights(challenge, field.prime, m)
    total, checks = sum_and_checks(field, contributions, refs.zero_contributors, weights)
    return np.concatenate([field.add(field.check(coded, "coded"), total), checks])


_W_BITS = 8  # limbs of a weight: a 32-bit half times a limb is below 2**40
_BLOCK = (1 << 13) - 1  # outputs per float64 block: 8191 terms below 2**40 sum below 2**53
_ROWS = 32  # contributors per chunk: the chunk's halves stay in cache


def sum_and_checks(
    field: PrimeField,
    contributions: Mapping[int, FieldArray],
    contributors: Sequence[int],
    weights: FieldArray,
) -> tuple[FieldArray, FieldArray]:
    """``sum_i rho_i[:m]`` (m,) and the offset checks ``rho_i[:m] @ r + rho_{i,*}`` (n,) in
    one pass over the contributions (a member's re-randomization and its checks).

    Equal to :func:`rerandomize`'s sum and :func:`offset_checks` (property-tested against
    Python integers), computed so that each contribution is read from memory once and no
    value is shifted or masked: a chunk of :data:`_ROWS` contributors is viewed as its
    32-bit halves ``x = x_0 + 2**32 x_1`` (an int64 read as two little-endian uint32, a
    free view, converted to float64 exactly), the weights are cut into 8-bit limbs
    ``r = sum_b r_b 2**(8 b)``, and one batched GEMM per block of :data:`_BLOCK` outputs
    gives every ``D_ab = x_a @ r_b``: terms below ``2**40``, block sums below ``2**53``,
    exact. The check is ``sum_ab 2**(32 a + 8 b) D_ab + rho_{i,*} mod p``; the sum is
    ``S_0 + 2**32 S_1 mod p`` from the halves' column sums (exact below ``2**21``
    contributors). Shapes: halves (2, rows, m), weight limbs (m, B), ``B = ceil(bits(p) / 8)``.

    Raises:
        ParameterError: as :func:`offset_checks`; more than ``2**21`` contributors.
    """
    prime = field.prime
    w = field.check(weights, "weights")
    m = int(w.shape[0])
    missing = [i for i in contributors if i not in contributions]
    if missing:
        raise ParameterError("contributions", f"lacks the zero-sharings of {missing}")
    n = len(contributors)
    if n == 0:
        return np.zeros(m, dtype=np.int64), np.zeros(0, dtype=np.int64)
    if n >= 1 << 21 or prime >= 1 << 63:
        raise ParameterError("contributors", "at most 2**21 contributors, p below 2**63")
    w_limbs = -(-prime.bit_length() // _W_BITS)
    w_float = np.empty((m, w_limbs), dtype=np.float64)
    for b in range(w_limbs):
        w_float[:, b] = (w >> (_W_BITS * b)) & ((1 << _W_BITS) - 1)
    rows = min(_ROWS, n)
    raw = np.empty((rows, m), dtype="<i8")
    halves = np.empty((2, rows, m), dtype=np.float64)
    column = np.zeros((2, m), dtype=np.float64)  # exact: below n * 2**32
    products = np.zeros((n, 2, w_limbs), dtype=np.int64)  # D_ab mod p per contributor
    masks = np.empty(n, dtype=np.int64)
    for r0 in range(0, n, rows):
        r1 = min(n, r0 + rows)
        k = r1 - r0
        for row, i in enumerate(contributors[r0:r1]):
            values = np.asarray(contributions[i])
            if (
                values.ndim != 1
                or values.shape[0] < m + 1
                or not np.issubdtype(values.dtype, np.integer)
            ):
                raise ParameterError(
                    f"contributions[{i}]",
                    f"must be an integer vector of at least {m + 1} values (outputs and the "
                    f"check mask), not {values.dtype} {values.shape}",
                )
            raw[row] = values[:m]
            masks[r0 + row] = values[-1]
        chunk = raw[:k]
        if chunk.size and (int(chunk.min()) < 0 or int(chunk.max()) >= prime):
            for i in contributors[r0:r1]:  # name the offending contributor
                field.check(np.asarray(contributions[i])[:m], f"contributions[{i}]")
        parts = chunk.view("<u4").reshape(k, m, 2)
        halves[0, :k] = parts[..., 0]
        halves[1, :k] = parts[..., 1]
        column += halves[:, :k].sum(axis=1)
        for b0 in range(0, m, _BLOCK):
            b1 = min(m, b0 + _BLOCK)
            d = np.matmul(halves[:, :k, b0:b1], w_float[b0:b1])  # (2, k, B), exact
            d = np.mod(d.astype(np.int64), prime).transpose(1, 0, 2)
            products[r0:r1] = np.mod(products[r0:r1] + d, prime)
    if int(masks.min()) < 0 or int(masks.max()) >= prime:
        for i in contributors:
            field.check(np.asarray(contributions[i]), f"contributions[{i}]")
    checks = masks.copy()
    for a in range(2):
        for b in range(w_limbs):
            term = times_pow2(products[:, a, b], 32 * a + _W_BITS * b, prime)
            checks = field.add(checks, term)
    low = np.mod(column[0].astype(np.int64), prime)
    high = np.mod(column[1].astype(np.int64), prime)
    total = field.add(low, times_pow2(high, 32, prime))
    return total, checks
