"""A federation's cryptographic parameters, validated once, with every overflow bound.

Two coded stages use two fields (a deliberate refinement of DESIGN.md section 2, which
names one ``p``):

* **clustering** (SecPC, degree 2): small vectors (reduced prompts, ``r`` about 128) but
  squared distances of sums, so it needs a wide field; default ``p = 2**61 - 1``.
* **aggregation** (degree 1): long vectors (prompt updates, ``n_ctx * d`` entries) but
  only sums, so a prime below ``2**31`` keeps the bulk matrix products on float64 BLAS
  (:mod:`crypto.field`); default ``p = 2**31 - 1``.

Overflow is a correctness bug: each decoded quantity must stay below ``(p-1)/2``.
With ``m <= N`` members per cluster, ``s = 2**bits`` and clip bound ``B``:

* linear sums: ``N * s * B < (p-1)/2``;
* point-centre distances: ``L_c * (2 * N * s * B)**2 < (p-1)/2`` with ``L_c = r`` (the
  distance stage always has ``K_c = 1``, below);
* centre-centre distances: ``L_c * (2 * M2 * s * B)**2 < (p-1)/2`` with
  ``M2 = floor(N/2) * ceil(N/2)``, the largest ``m_c * m_c'`` for disjoint clusters.

:class:`CryptoParams` refuses any configuration that could wrap, naming the parameter
and the limit; :func:`choose_code` and :meth:`CryptoParams.for_federation` pick ``K``,
``T`` and the largest safe ``bits``. The codes themselves (:class:`CodeSpec`, the thresholds
and the equivocation rule below) live in :mod:`crypto.codes`, re-exported here, so that
:mod:`crypto.committee` needs only them and this module can import it.

Two rules protect what the coordinator decodes (docs/protocol.md, "Parameters"):

* the distance stage uses ``K_c = 1``: with ``K_c > 1`` the degree-2 decode yields the
  ``K_c`` per-chunk partial sums of each squared distance, and when ``r <= K_c`` each
  chunk is one coordinate, so the coordinator would read ``(x_{i,l} - mu_l)**2``
  coordinate by coordinate. With one chunk the only value at the data point is the total;
* every stage's recovery threshold ``R`` satisfies ``2 R - T > P`` (:func:`equivocation_safe`),
  ``P`` the code's evaluation points (``N``, or ``c`` with a committee) and ``T`` the
  colluders the federation tolerates (:attr:`CryptoParams.colluders`). A coordinator that
  shows two different requests to two groups needs ``R`` results for each; the ``T``
  colluders answer both, so two decodable groups ``S_A, S_B`` (``|S_A| = |S_B| = R``)
  have ``|S_A & S_B| >= 2R - P >= T + 1`` members in common, one of them honest, and an
  honest participant answers only one request per stage. If ``2R - T <= P`` the ``P - T``
  honest members split into ``R - T`` and ``P - R >= R - T`` and both requests decode
  (docs/protocol.md, section 7, "Equivocation"). The bound is exact for *decoding*; what
  a group short of ``R`` still learns is in docs/protocol.md, section 9.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from secfpp.crypto.codes import (
    DEFAULT_AGGREGATION_CLIP,
    DEFAULT_CLUSTERING_CLIP,
    DEFAULT_DROPOUT_FRACTION,
    DEFAULT_REDUCED_DIM,
    MERSENNE_31,
    MERSENNE_61,
    CodeSpec,
    _centre_peak,
    _linear_peak,
    _point_peak,
    all_to_all_codes,
    choose_code,
    distance_colluders,
    equivocation_safe,
    federation_dropouts,
    largest_safe_bits,
    safe_dropouts,
)
from secfpp.crypto.committee import plan_committee
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.field import MAX_PRIME, PrimeField, is_prime
from secfpp.crypto.lcc import LagrangeCode

__all__ = [
    "DEFAULT_DROPOUT_FRACTION",
    "CodeSpec",
    "CryptoParams",
    "FieldSpec",
    "choose_code",
    "distance_colluders",
    "equivocation_safe",
    "federation_dropouts",
    "largest_safe_bits",
    "safe_dropouts",
]

# MERSENNE_61, MERSENNE_31 and the DEFAULT_* values come from crypto.codes (imported above).


@dataclass(frozen=True)
class FieldSpec:
    """Field and quantization of one stage: ``GF(prime)``, ``s = 2**bits``, clip ``B``."""

    prime: int
    bits: int
    clip: float

    def __post_init__(self) -> None:
        if not isinstance(self.prime, int) or not 2 < self.prime < MAX_PRIME:
            raise ParameterError("prime", f"must be an int in (2, 2**62), not {self.prime!r}")
        if not is_prime(self.prime):
            raise ParameterError("prime", f"must be prime, not {self.prime}")
        if not isinstance(self.bits, int) or not 0 <= self.bits <= 52:
            raise ParameterError("bits", f"must be an int in [0, 52], not {self.bits!r}")
        if not (isinstance(self.clip, int | float) and math.isfinite(self.clip) and self.clip > 0):
            raise ParameterError("clip", f"must be a positive finite number, not {self.clip!r}")

    @property
    def scale(self) -> int:
        """``s = 2**bits``."""
        return 1 << self.bits

    @property
    def half(self) -> int:
        """``(p-1)/2``, the largest magnitude a decoded value may have."""
        return (self.prime - 1) // 2

    @property
    def field(self) -> PrimeField:
        """The field object (cheap to build; holds no secrets)."""
        return PrimeField(self.prime)

    def quantum_bound(self) -> int:
        """``s * B`` rounded up: the largest magnitude of one quantized entry."""
        return math.ceil(self.scale * self.clip)


@dataclass(frozen=True)
class CryptoParams:
    """Everything that fixes a federation's coded computations.

    Attributes:
        n_participants: ``N``, participants holding evaluation points ``alpha_0..alpha_{N-1}``.
        reduced_dim: ``r``, length of the reduced prompt ``x_i`` that SecPC clusters.
        clustering_code, clustering_field: LCC code and field of the distance stage.
        aggregation_code, aggregation_field: LCC code and field of cluster sums.
        l2_clip: ``C``, L2 bound of one participant's (real-valued) update.
        min_aggregation_size: smallest member set a participant will sum over.
        min_reference_size: smallest reference set (cluster or probe, and what a probe
            leaves of its cluster) a participant will compute distances to; 1 would allow
            distances to single participants' prompts, which the default 2 refuses.
        max_clusters: upper bound on the number of clusters.
        committee_size: ``c``, members each participant shares to (issue 17,
            :mod:`crypto.committee`); ``None`` (or ``N``) means all ``N`` (all-to-all
            sharing). With ``c < N`` the two codes run over ``c`` evaluation points (member
            ``k`` of the round's sorted committee holds ``alpha_k``): their thresholds are
            checked against ``c`` (:attr:`code_points`), while the overflow bounds stay
            those of ``N`` summands, since the decoded values are sums over all ``N``.
        participant_colluders: ``T`` over all ``N`` participants when a committee's codes
            tolerate a different ``T_c`` (:func:`for_federation` sets it in committee mode);
            ``None``: the codes' ``T``. What bounds the colluders among the *contributors* of
            a sum or of the distance noise, who are participants, not committee members
            (:attr:`colluders_among_participants`, :mod:`crypto.dp`).
    """

    n_participants: int
    reduced_dim: int
    clustering_code: CodeSpec
    aggregation_code: CodeSpec
    clustering_field: FieldSpec = field(
        default_factory=lambda: FieldSpec(prime=MERSENNE_61, bits=16, clip=DEFAULT_CLUSTERING_CLIP)
    )
    aggregation_field: FieldSpec = field(
        default_factory=lambda: FieldSpec(prime=MERSENNE_31, bits=16, clip=DEFAULT_AGGREGATION_CLIP)
    )
    l2_clip: float = 10.0
    min_aggregation_size: int = 3
    min_reference_size: int = 2
    max_clusters: int = 8
    committee_size: int | None = None
    participant_colluders: int | None = None

    def __post_init__(self) -> None:
        n = self.n_participants
        if not isinstance(n, int) or n < 2:
            raise ParameterError("n_participants", f"must be an int >= 2, not {n!r}")
        if not isinstance(self.reduced_dim, int) or self.reduced_dim < 1:
            raise ParameterError("reduced_dim", f"must be an int >= 1, not {self.reduced_dim!r}")
        if not (math.isfinite(self.l2_clip) and self.l2_clip > 0):
            raise ParameterError("l2_clip", f"must be a positive finite number, not {self.l2_clip}")
        if (
            not isinstance(self.min_aggregation_size, int)
            or not 2 <= self.min_aggregation_size <= n
        ):
            raise ParameterError(
                "min_aggregation_size",
                f"must be an int in [2, {n}], not {self.min_aggregation_size!r}",
            )
        if not isinstance(self.min_reference_size, int) or not 1 <= self.min_reference_size <= n:
            raise ParameterError(
                "min_reference_size",
                f"must be an int in [1, {n}], not {self.min_reference_size!r}",
            )
        if not isinstance(self.max_clusters, int) or self.max_clusters < 1:
            raise ParameterError("max_clusters", f"must be an int >= 1, not {self.max_clusters!r}")
        pc = self.participant_colluders
        if pc is not None and (isinstance(pc, bool) or not isinstance(pc, int) or not 0 <= pc < n):
            raise ParameterError(
                "participant_colluders", f"must be None or an int in [0, {n - 1}], not {pc!r}"
            )
        c = self.committee_size
        if c is not None and (not isinstance(c, int) or not 3 <= c <= n):
            raise ParameterError("committee_size", f"must be None or an int in [3, {n}], not {c!r}")
        if self.clustering_code.k != 1:
            raise ParameterError(
                "clustering_code",
                f"must have K = 1, not {self.clustering_code.k}: with K > 1 the coordinator "
                "decodes per-chunk partial distances (see the module docstring)",
            )
        self._check_code("clustering_code", self.clustering_code, self.clustering_field, degree=2)
        self._check_code(
            "aggregation_code", self.aggregation_code, self.aggregation_field, degree=1
        )
        self._check_overflow()
        _ = self.attestation_quorum  # reachable by every stage that could decode

    def _check_code(self, name: str, code: CodeSpec, spec: FieldSpec, *, degree: int) -> None:
        need = code.threshold(degree)
        points = self.code_points
        who = "N" if points == self.n_participants else "c (committee_size)"
        if points < need:
            raise ParameterError(
                name,
                f"K={code.k}, T={code.t} needs {who} >= {degree}*(K+T-1)+1 = {need} for a "
                f"degree-{degree} stage, but {who} = {points}",
            )
        t = self.colluders
        if not equivocation_safe(need, colluders=t, points=points):
            raise ParameterError(
                name,
                f"K={code.k}, T={code.t} decodes the degree-{degree} stage from R = {need} of "
                f"{who} = {points} results, but with T = {t} colluders answering two requests "
                f"it must have 2R - T > {who}, i.e. R >= {(points + t) // 2 + 1}, so that two "
                "groups that each decode share an honest participant (equivocation): raise "
                f"T_c or tolerate at most {safe_dropouts(points, t)} dropouts",
            )
        if code.k + code.t + points >= spec.prime:
            raise ParameterError(name, f"needs K+T+N < p = {spec.prime} for distinct points")

    def _check_overflow(self) -> None:
        n = self.n_participants
        agg = self.aggregation_field
        peak = _linear_peak(n, agg.quantum_bound())
        if peak >= agg.half:
            safe = largest_safe_bits(prime=agg.prime, clip=agg.clip, n_participants=n, degree=1)
            raise ParameterError(
                "aggregation_field.bits",
                f"= {agg.bits} lets a sum of N = {n} updates reach N*s*B = {peak} >= (p-1)/2 = "
                f"{agg.half}; the largest safe value is {safe}",
            )
        cl = self.clustering_field
        chunk = self.clustering_chunk
        quantum = cl.quantum_bound()
        for kind, value in (
            ("point-centre", _point_peak(n, quantum, chunk)),
            ("centre-centre", _centre_peak(n, quantum, chunk)),
        ):
            if value >= cl.half:
                safe = largest_safe_bits(
                    prime=cl.prime, clip=cl.clip, n_participants=n, degree=2, chunk=chunk
                )
                raise ParameterError(
                    "clustering_field.bits",
                    f"= {cl.bits} lets {kind} distances reach {value} >= (p-1)/2 = {cl.half} "
                    f"(chunk length {chunk}, N = {n}, s*B = {quantum}); the largest safe value "
                    f"is {safe}",
                )

    # -- derived ---------------------------------------------------------------------
    @property
    def colluders(self) -> int:
        """``T``: colluders the federation tolerates, the smaller code ``T`` (``T_c`` may be
        raised above it only to make the distance threshold equivocation-safe)."""
        return min(self.clustering_code.t, self.aggregation_code.t)

    @property
    def colluders_among_participants(self) -> int:
        """``T`` over all participants: :attr:`participant_colluders` when set (committee
        mode, where the codes' ``T_c`` bounds colluders among the ``c`` members only), else
        :attr:`colluders`. The DP calibrations use it: a sum's or the distance noise's
        contributors are participants (:func:`crypto.dp.distributed.honest_shares`,
        :func:`crypto.dp.distance.noisy_contributor_floor`)."""
        if self.participant_colluders is not None:
            return self.participant_colluders
        return self.colluders

    @property
    def code_points(self) -> int:
        """Evaluation points of both codes: ``c`` with a committee, else ``N``."""
        c = self.committee_size
        return self.n_participants if c is None else c

    @property
    def has_committee(self) -> bool:
        """Whether participants share to a committee of ``c < N`` members only."""
        return self.code_points < self.n_participants

    @property
    def clustering_chunk(self) -> int:
        """``ceil(r / K_c)``: entries per chunk of a shared reduced prompt."""
        return -(-self.reduced_dim // self.clustering_code.k)

    @property
    def clustering_dropouts(self) -> int:
        """How many participants (committee members) may miss the distance stage."""
        return self.code_points - self.clustering_code.threshold(2)

    @property
    def aggregation_dropouts(self) -> int:
        """How many participants (committee members) may miss the aggregation stage."""
        return self.code_points - self.aggregation_code.threshold(1)

    @property
    def attestation_quorum(self) -> int:
        """``Q = floor((P + T) / 2) + 1`` attestations of a coded stage's request a
        participant needs before it answers (:func:`crypto.attestation.attestation_quorum`,
        ``P`` = :attr:`code_points`, ``T`` = :attr:`colluders`). Checked against both
        stages' thresholds (refused with a ``ParameterError`` on ``attestation_quorum``
        where a stage could decode but never reach its quorum; the equivocation bound
        ``2R - T > P`` already implies ``R >= Q``)."""
        from secfpp.crypto.attestation import attestation_quorum  # imports transport

        survivors = min(self.clustering_code.threshold(2), self.aggregation_code.threshold(1))
        return attestation_quorum(self.code_points, self.colluders, survivors=survivors)

    def clustering_lcc(self) -> LagrangeCode:
        """The LCC code of the distance stage."""
        c = self.clustering_code
        return LagrangeCode(self.clustering_field.field, c.k, c.t, self.code_points)

    def aggregation_lcc(self) -> LagrangeCode:
        """The LCC code of the aggregation stage."""
        c = self.aggregation_code
        return LagrangeCode(self.aggregation_field.field, c.k, c.t, self.code_points)

    @classmethod
    def for_federation(
        cls,
        n_participants: int,
        *,
        reduced_dim: int = DEFAULT_REDUCED_DIM,
        dropout_fraction: float | None = None,
        collusion_fraction: float = 0.25,
        clustering_clip: float = DEFAULT_CLUSTERING_CLIP,
        aggregation_clip: float = DEFAULT_AGGREGATION_CLIP,
        clustering_prime: int = MERSENNE_61,
        aggregation_prime: int = MERSENNE_31,
        committee: bool | int = False,
        **kwargs: Any,
    ) -> CryptoParams:
        """Parameters tolerating ``D = floor(f_d * N)`` dropouts and ``T = max(1, floor(f_c *
        N))`` colluders in both stages, with the largest safe quantization ``bits``.

        Every threshold is equivocation-safe, ``2 R - T > N`` (module doc). The distance stage
        has ``K_c = 1`` and ``T_c`` = :func:`distance_colluders` (the smallest ``T_c >= T``
        with ``2 (2 T_c + 1) - T > N``); the aggregation stage ``T_a = T`` and the largest
        ``K_a`` with threshold ``R_a = N - D``. Both need ``D <= safe_dropouts(N, T)``
        (about ``(N - T) / 2 - 1``): a larger ``dropout_fraction`` is refused with a
        :class:`ParameterError` that names the largest safe one. ``dropout_fraction=None``
        (the default) means :data:`DEFAULT_DROPOUT_FRACTION`, lowered to the safe limit where
        that is smaller (``N = 5``, ``8``: one dropout). ``N = 2`` has no safe code.

        ``committee``: ``True`` sizes a committee with
        :func:`crypto.committee.committee_size` (same fractions; ``N`` up to 128), an int
        asks for that size (:func:`crypto.committee.plan_committee` refuses a size whose
        committee could hold more than ``T`` colluders with probability ``>= 2**-40``).
        A committee of ``c < N`` gets the committee codes over ``c`` points
        (:func:`crypto.committee.committee_threshold`); ``c = N`` is recorded and the codes
        are the all-to-all ones above. The quantization bits are those of ``N`` summands
        either way.
        """
        n = n_participants
        if not isinstance(n, int) or n < 3:
            raise ParameterError(
                "n_participants",
                f"must be an int >= 3, not {n!r}: with 2 participants no code has a threshold "
                "R with 2R - T > N (equivocation)",
            )
        colluders = max(1, math.floor(collusion_fraction * n))
        chunk = reduced_dim
        c_bits = largest_safe_bits(
            prime=clustering_prime, clip=clustering_clip, n_participants=n, degree=2, chunk=chunk
        )
        a_bits = largest_safe_bits(
            prime=aggregation_prime, clip=aggregation_clip, n_participants=n, degree=1
        )
        plan = None
        if committee is not False:
            if committee is not True and (not isinstance(committee, int) or committee < 3):
                raise ParameterError(
                    "committee_size", f"must be an int in [3, {n}], not {committee!r}"
                )
            plan = plan_committee(
                n,
                collusion_fraction=collusion_fraction,
                dropout_fraction=dropout_fraction,
                size=None if committee is True else int(committee),
            )
            kwargs["committee_size"] = plan.size
        if plan is not None and not plan.full:
            c_code, a_code = plan.clustering_code, plan.aggregation_code
            kwargs["participant_colluders"] = colluders  # the codes' T_c bound members only
        else:
            c_code, a_code = all_to_all_codes(
                n, colluders=colluders, dropout_fraction=dropout_fraction
            )
        return cls(
            n_participants=n,
            reduced_dim=reduced_dim,
            clustering_code=c_code,
            aggregation_code=a_code,
            clustering_field=FieldSpec(prime=clustering_prime, bits=c_bits, clip=clustering_clip),
            aggregation_field=FieldSpec(
                prime=aggregation_prime, bits=a_bits, clip=aggregation_clip
            ),
            **kwargs,
        )
