"""LCC codes, their thresholds and the overflow bounds of their fields: what a code of ``P``
evaluation points with ``T`` colluders and ``D`` dropouts may be, and how many fixed-point
bits a field carries (the bounds are derived in :mod:`crypto.params`), independent of
committees.

This is the layer both :mod:`crypto.params` (a federation's parameters) and
:mod:`crypto.committee` (committee sizing) build on, so that neither imports the other's
caller (``params -> committee -> codes``, no cycle); :mod:`crypto.params` re-exports every
name here.

A stage decoding a degree-``d`` polynomial of shares of a ``K``-chunk, ``T``-private code
needs ``R = d (K + T - 1) + 1`` results (:meth:`CodeSpec.threshold`). Every threshold must
be equivocation-safe, ``2 R - T > P`` (:func:`equivocation_safe`; the argument is in
:mod:`crypto.params` and docs/protocol.md, section 7): any two decodable groups share an
honest member. The distance stage (``K_c = 1``, degree 2) therefore may need ``T_c > T``
(:func:`distance_colluders`), and the dropouts both stages tolerate are bounded by
:func:`safe_dropouts`. :func:`all_to_all_codes` gives the codes of a federation in which
every participant shares to all ``N``, and :func:`largest_safe_bits` the most fixed-point
bits a stage's field carries without wrapping.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from secfpp.crypto.errors import ParameterError

__all__ = [
    "DEFAULT_AGGREGATION_CLIP",
    "DEFAULT_CLUSTERING_CLIP",
    "DEFAULT_DROPOUT_FRACTION",
    "DEFAULT_REDUCED_DIM",
    "MERSENNE_31",
    "MERSENNE_61",
    "CodeSpec",
    "all_to_all_codes",
    "check_default_fields",
    "choose_code",
    "distance_colluders",
    "equivocation_safe",
    "federation_dropouts",
    "largest_safe_bits",
    "safe_dropouts",
]

MERSENNE_61 = 2**61 - 1
MERSENNE_31 = 2**31 - 1
DEFAULT_REDUCED_DIM = 128
"""``r`` of :meth:`CryptoParams.for_federation <crypto.params.CryptoParams.for_federation>`."""
DEFAULT_CLUSTERING_CLIP = 4.0
"""Per-entry clip ``B`` of the distance stage's field (default ``p = 2**61 - 1``)."""
DEFAULT_AGGREGATION_CLIP = 1.0
"""Per-entry clip ``B`` of the aggregation stage's field (default ``p = 2**31 - 1``)."""


@dataclass(frozen=True)
class CodeSpec:
    """LCC code of one stage: ``K`` chunks, ``T`` colluders tolerated."""

    k: int
    t: int

    def __post_init__(self) -> None:
        if not isinstance(self.k, int) or self.k < 1:
            raise ParameterError("k", f"must be an int >= 1, not {self.k!r}")
        if not isinstance(self.t, int) or self.t < 1:
            raise ParameterError("t", f"must be an int >= 1 (privacy needs T >= 1), not {self.t!r}")

    def threshold(self, degree: int) -> int:
        """Results needed to decode a degree-``degree`` computation."""
        return degree * (self.k + self.t - 1) + 1


DEFAULT_DROPOUT_FRACTION = 0.25
"""Dropouts ``for_federation`` tolerates when not told: ``floor(0.25 N)``, lowered to
:func:`safe_dropouts` where that is smaller (``N = 5`` and ``N = 8`` at the default
collusion fraction)."""


def equivocation_safe(threshold: int, *, colluders: int, points: int) -> bool:
    """``2 R - T > P``: any two sets of ``R`` of the ``P`` result holders share ``T + 1``
    members, so at least one honest member, who answers one request per stage.

    >>> equivocation_safe(13, colluders=6, points=24), equivocation_safe(17, colluders=6, points=24)
    (False, True)
    """
    return 2 * threshold - colluders > points


def distance_colluders(points: int, colluders: int) -> int:
    """``T_c``: the smallest ``T_c >= T`` whose distance threshold ``R_c = 2 T_c + 1`` (``K_c
    = 1``) is equivocation-safe, ``2 (2 T_c + 1) - T > P``, i.e. ``max(T, floor((P + T - 2)
    / 4) + 1)``. A larger ``T_c`` only raises ``R_c``: privacy is still claimed for ``T``.

    >>> distance_colluders(24, 6), distance_colluders(8, 2)
    (8, 3)
    """
    return max(colluders, (points + colluders - 2) // 4 + 1)


def safe_dropouts(points: int, colluders: int) -> int:
    """The most dropouts ``D`` both stages tolerate among ``P`` points with ``T`` colluders
    while every threshold is equivocation-safe; ``-1`` when even ``D = 0`` is not.

    Distance stage: ``D <= P - (2 T_c + 1)`` with ``T_c`` = :func:`distance_colluders`.
    Aggregation stage: ``R_a = P - D`` and ``2 (P - D) - T > P``, i.e. ``D <= floor((P - T
    - 1) / 2)``; then ``K_a = P - D - T >= 1``.

    >>> safe_dropouts(8, 2), safe_dropouts(40, 10), safe_dropouts(24, 6)
    (1, 13, 7)
    """
    if points < 1 or colluders < 1:
        raise ParameterError("colluders", f"need P >= 1 and T >= 1, not P={points}, T={colluders}")
    t_c = distance_colluders(points, colluders)
    return max(-1, min((points - colluders - 1) // 2, points - 2 * t_c - 1))


def federation_dropouts(
    points: int, *, colluders: int, dropout_fraction: float | None, name: str
) -> int:
    """``D = floor(f_d P)``, checked against :func:`safe_dropouts`; ``f_d = None`` gives
    ``min(floor(DEFAULT_DROPOUT_FRACTION * P), safe_dropouts(P, T))``.

    Raises :class:`ParameterError` naming ``dropout_fraction`` and the largest safe fraction
    when ``D`` is too large, or naming ``name`` (what fixed ``T``) when even ``D = 0`` is
    unsafe.
    """
    if dropout_fraction is not None and not (
        isinstance(dropout_fraction, int | float) and 0 <= dropout_fraction < 1
    ):
        raise ParameterError("dropout_fraction", f"must be in [0, 1), not {dropout_fraction!r}")
    limit = safe_dropouts(points, colluders)
    if limit < 0:
        raise ParameterError(
            name,
            f"gives T = {colluders} colluders among {points}: no code has a threshold R <= "
            f"{points} with 2R - T > {points} (equivocation); at most "
            f"{_largest_safe_colluders(points)} colluders fit",
        )
    if dropout_fraction is None:
        return min(math.floor(DEFAULT_DROPOUT_FRACTION * points), limit)
    dropouts = math.floor(dropout_fraction * points)
    if dropouts > limit:
        raise ParameterError(
            "dropout_fraction",
            f"= {dropout_fraction} tolerates {dropouts} of {points} dropouts, but with T = "
            f"{colluders} colluders answering two different requests every threshold R must "
            f"have 2R - T > {points} (equivocation): the largest safe dropout_fraction is "
            f"{limit}/{points} = {limit / points:.6g} ({limit} dropout(s); any value below "
            f"{(limit + 1) / points:.6g})",
        )
    return dropouts


def _largest_safe_colluders(points: int) -> int:
    return max((t for t in range(1, points) if safe_dropouts(points, t) >= 0), default=0)


def choose_code(n_participants: int, *, dropouts: int, colluders: int, degree: int) -> CodeSpec:
    """The code with the most chunks that tolerates ``dropouts`` and ``colluders``.

    ``T = colluders`` and ``K`` is the largest integer with
    ``degree * (K + T - 1) + 1 <= N - dropouts``.
    """
    if n_participants < 1:
        raise ParameterError("n_participants", f"must be >= 1, not {n_participants}")
    if not 0 <= dropouts < n_participants:
        raise ParameterError("dropouts", f"must be in [0, {n_participants}), not {dropouts}")
    if colluders < 1:
        raise ParameterError("colluders", f"must be >= 1, not {colluders}")
    if degree < 1:
        raise ParameterError("degree", f"must be >= 1, not {degree}")
    available = n_participants - dropouts
    k = (available - 1) // degree + 1 - colluders
    if k < 1:
        raise ParameterError(
            "colluders",
            f"= {colluders} with {dropouts} dropouts leaves no room for a degree-{degree} code "
            f"among {n_participants} participants (need degree*(K+T-1)+1 <= N - dropouts)",
        )
    return CodeSpec(k=k, t=colluders)


def all_to_all_codes(
    n_participants: int, *, colluders: int, dropout_fraction: float | None
) -> tuple[CodeSpec, CodeSpec]:
    """The distance and aggregation codes of ``N`` participants sharing to all ``N``.

    ``D`` = :func:`federation_dropouts` (named ``collusion_fraction`` when even ``D = 0``
    is unsafe), ``(K_c, T_c) = (1, distance_colluders(N, T))`` and the aggregation code of
    :func:`choose_code` for ``T`` colluders and ``D`` dropouts (degree 1).
    """
    dropouts = federation_dropouts(
        n_participants,
        colluders=colluders,
        dropout_fraction=dropout_fraction,
        name="collusion_fraction",
    )
    clustering = CodeSpec(k=1, t=distance_colluders(n_participants, colluders))
    aggregation = choose_code(n_participants, dropouts=dropouts, colluders=colluders, degree=1)
    return clustering, aggregation


def _linear_peak(n: int, quantum: int) -> int:
    return n * quantum


def _point_peak(n: int, quantum: int, chunk: int) -> int:
    return chunk * (2 * n * quantum) ** 2


def _centre_peak(n: int, quantum: int, chunk: int) -> int:
    pair = (n // 2) * ((n + 1) // 2)
    return chunk * (2 * pair * quantum) ** 2


def largest_safe_bits(
    *, prime: int, clip: float, n_participants: int, degree: int, chunk: int = 1
) -> int:
    """Largest ``bits`` for which a stage's decoded values cannot wrap (see module doc)."""
    best = -1
    for bits in range(53):
        quantum = math.ceil((1 << bits) * clip)
        if degree == 1:
            peak = _linear_peak(n_participants, quantum)
        else:
            peak = max(
                _point_peak(n_participants, quantum, chunk),
                _centre_peak(n_participants, quantum, chunk),
            )
        if peak >= (prime - 1) // 2:
            break
        best = bits
    if best < 0:
        raise ParameterError("clip", f"= {clip} overflows GF({prime}) even with bits = 0")
    return best


def check_default_fields(n_participants: int) -> None:
    """Raise :class:`ParameterError` (naming ``clip``) when the default fields of
    :meth:`CryptoParams.for_federation <crypto.params.CryptoParams.for_federation>`
    (``p = 2**61 - 1``, ``B = 4``, ``r = 128`` for distances; ``p = 2**31 - 1``, ``B = 1``
    for sums) cannot hold ``N`` summands even at ``bits = 0``, as it would."""
    largest_safe_bits(
        prime=MERSENNE_61,
        clip=DEFAULT_CLUSTERING_CLIP,
        n_participants=n_participants,
        degree=2,
        chunk=DEFAULT_REDUCED_DIM,
    )
    largest_safe_bits(
        prime=MERSENNE_31, clip=DEFAULT_AGGREGATION_CLIP, n_participants=n_participants, degree=1
    )
