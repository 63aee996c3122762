"""Distributed discrete Gaussian noise on the distance stage's outputs (docs/protocol.md
sections 4, 7 and 9).

**Mechanism.** With the re-randomized distance stage (:mod:`crypto.rerandomize`) every
present participant ``i`` (a *contributor*) sends each recipient ``j`` the value
``rho_{i,o}(alpha_j)`` of a random polynomial of the product's degree ``d`` for every
output slot ``o``. Without noise ``rho_{i,o}(beta) = 0``. With noise ``rho_{i,o}(beta) =
e_{i,o}``, ``e_{i,o} ~ N_Z(0, sigma^2)`` independent (drawn with the cryptographic RNG,
:func:`crypto.dp.discrete.discrete_gaussian`): the polynomial is still uniform among
those of degree ``<= d`` with that value at the data point
(:meth:`crypto.rerandomize.ZeroSharing.contribute`, ``values=``), so the results still
form a Reed-Solomon codeword (the decoder corrects wrong results as before) and the
coordinator decodes ``dec_o + sum_{i in C} e_{i,o}``: the true value plus the sum of the
contributors' noise, exactly, in the field's integer units.

**Units.** The decoded slots are integers: ``dec(i, S) = |m_S q_i - Q_S|^2`` with
``q_i = round(s x_i)`` the quantized reduced prompt (``s = 2**bits`` of the clustering
field), ``Q_S = sum_{k in S} q_k`` (:mod:`crypto.secpc`); the centre-centre slots are left
at 0 (see "Sensitivity"). The noise is added in these units, one ``sigma`` for every
slot, so the real squared distance ``D[i, S] = dec / (s^2 m_S^2)`` carries noise of std
``sqrt(n) sigma / (s^2 m_S^2)`` with ``n`` contributors. ``sigma`` is set from the noise
multiplier ``z``: ``sqrt(n_min) sigma >= z * 3 R^2 m_min^2`` (:attr:`DistanceNoise.unit`):
the summed noise is at least ``z`` times the largest change one participant can make to a
point-centre value of a smallest reference set (``m_min``); a real ``D`` entry of a set
of ``m`` members has std ``>= z * 3 rho^2 m_min^2 / m^2`` (``rho`` the L2 clip below).

**Clip.** Each contributor clips its reduced prompt to L2 norm ``rho`` (real units,
:func:`clip_reduced`) before quantizing, so ``|q_i| <= R = s rho + sqrt(r) / 2``
(deterministic rounding moves each of the ``r`` entries by at most ``1/2``).

**Sensitivity** (neighbouring relation: one participant's prompt vector ``q_a`` replaced
by zero, set memberships and sizes fixed by the request; the relation the aggregation
stage's ledger uses, :mod:`crypto.dp.distributed`). For ``v`` and ``v' = v + e``,
``| |v'|^2 - |v|^2 | <= |e| (|v| + |v'|)``. With every ``|q_k| <= R``:

* own row, ``a in S`` (``|S| = m``): ``v = (m-1) q_a - Q_{S\\a}``, ``|e| = (m-1)|q_a|``,
  ``|v| <= 2(m-1)R``, ``|v'| <= (m-1)R``: change ``<= 3 (m-1)^2 R^2``;
* own row, ``a not in S``: ``v = m q_a - Q_S``, ``|e| <= mR``, ``|v| <= 2mR``,
  ``|v'| <= mR``: ``<= 3 m^2 R^2``;
* another present participant's row ``i != a``, ``a in S``: ``|e| = |q_a| <= R``,
  ``|v| <= 2mR``, ``|v'| <= (2m-1)R``: ``<= (4m - 1) R^2`` (``n - 1`` rows, and ``a``
  is in at most two sets: its cluster and that cluster's probe);
* centre pairs: none are released. With noise on, participants leave the centre-centre
  slots at 0 (:func:`crypto.secpc.coded_distances`, ``centre_pairs=False``) and the
  coordinator derives ``E`` from the noisy ``D`` (post-processing,
  :func:`crypto.secpc.decode_distances`). Released, a pair would dominate the bound: its
  change is up to ``(4 m_c - 1) m_c'^2 R^2`` in decoded units, ``m_c'^2 / 3`` times a
  point-centre value's, for noise of the same ``sigma``.

The L2 sensitivity of the whole output vector is the square root of the sum of the
squares of these bounds, maximized over the participant ``a``
(:func:`distance_sensitivity`); it depends on the request's sizes, which are public, so
the coordinator records each round's release with its own request's value.

**Accounting.** One release per clustering round, recorded as a
``"distributed_discrete_gaussian"`` :class:`~crypto.dp.ledger.LedgerRecord` of kind
``"distance"`` covering every present participant, ``shares = n_min`` (the fewest
contributors a request can have: every cluster of a request has at least ``m_min``
present members, :func:`crypto.refusal.check_distance_request`, so ``n >= m_min``),
``dimension`` the result length, and ``rho`` from KLS 2021 Proposition 14
(:func:`crypto.dp.accounting.discrete_gaussian_rho`). A dropout before sharing only
removes a contributor together with its data; more contributors than ``n_min`` add noise
(post-processing).

**Colluders.** ``T`` contributors who collude with the coordinator know their own noise and
can subtract it. Participants therefore refuse a noisy request that names fewer than
``n_floor = T + m_min`` present participants (:func:`noisy_contributor_floor`,
:func:`crypto.refusal.check_distance_request`, reason ``too_few_contributors``), and the
coordinator runs no distance stage in a round with fewer present: every answered request
keeps at least ``n_floor - T = m_min = n_min`` honest noise shares, the count the ledger
records, whoever the colluders are. A federation of fewer than ``n_floor`` participants is
refused at creation.

**Field headroom.** A noisy decoded slot must not wrap: ``peak + NOISE_TAIL
sqrt(N) sigma < (p-1)/2`` with ``peak`` the data bound of :class:`~crypto.params.
CryptoParams` and ``sigma <= 2^40`` (the sampler's range). :func:`distance_noise_bits`
picks the largest clustering ``bits`` that fits.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.codes import _centre_peak, _point_peak
from secfpp.crypto.dp.accounting import discrete_gaussian_rho
from secfpp.crypto.dp.discrete import MAX_SIGMA2, discrete_gaussian
from secfpp.crypto.dp.distributed import NOISE_TAIL
from secfpp.crypto.dp.ledger import LedgerRecord, ParticipantId
from secfpp.crypto.dp.mechanisms import MIN_SHARE_SIGMA, clip_l2, lattice_sigma2
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.params import CryptoParams
from secfpp.crypto.refset_rules import effective_minimum
from secfpp.crypto.rng import RandomSource
from secfpp.crypto.secpc import ReferenceSets

__all__ = [
    "DistanceNoise",
    "clip_reduced",
    "distance_noise_bits",
    "distance_sensitivity",
    "distance_sensitivity_bound",
    "noisy_contributor_floor",
    "with_distance_noise_headroom",
]


def quantized_radius(*, l2_clip: float, bits: int, reduced_dim: int) -> float:
    """``R = s rho + sqrt(r) / 2``: the L2 bound of a clipped, quantized reduced prompt."""
    return (1 << bits) * l2_clip + math.sqrt(reduced_dim) / 2.0


def distance_sensitivity(refs: ReferenceSets, radius: float) -> float:
    """L2 sensitivity of the result vector of ``refs`` in decoded integer units (module doc).

    Args:
        refs: the request (its sizes are what matters).
        radius: ``R``, the bound on every ``|q_k|`` (quantized units).
    Returns:
        ``max_a sqrt(sum of squared per-slot bounds)``, a float (an upper bound).
    """
    return _sensitivity(refs.participants, refs.sets, radius)


def distance_sensitivity_bound(
    participants: Sequence[int], clusters: Sequence[Sequence[int]], radius: float
) -> float:
    """An upper bound on :func:`distance_sensitivity` of every request a round can make,
    known at the round's start, before anybody shared.

    A request asks for each cluster's present members and at most one probe per cluster, a
    proper subset of it (:class:`~crypto.secpc.ReferenceSets`); every per-slot bound of the
    module docstring grows with the set's size ``m`` and with the number ``n`` of present
    participants. So counting every cluster twice, as a set and as its own probe, with every
    one of ``participants`` present, bounds every request of the round.

    Args:
        participants: who may share this round.
        clusters: the round's membership, member lists (those not in ``participants`` are
            ignored).
        radius: ``R``.
    """
    present = set(participants)
    sets = [tuple(m for m in members if m in present) for members in clusters]
    doubled = [members for members in sets if members for _ in range(2)]
    return _sensitivity(sorted(present), doubled, radius)


def _sensitivity(
    participants: Sequence[int], sets: Sequence[Sequence[int]], radius: float
) -> float:
    if not (math.isfinite(radius) and radius > 0):
        raise ParameterError("radius", f"must be a finite number > 0, not {radius}")
    n = len(participants)
    r2 = radius * radius
    sizes = [len(m) for m in sets]
    members_of = [set(m) for m in sets]
    worst = 0.0
    for a in participants:
        total = 0.0
        for members, m in zip(members_of, sizes, strict=True):
            if a in members:
                total += (3 * (m - 1) ** 2 * r2) ** 2 + (n - 1) * ((4 * m - 1) * r2) ** 2
            else:
                total += (3 * m * m * r2) ** 2
        worst = max(worst, total)
    return math.sqrt(worst)


def noisy_contributor_floor(params: CryptoParams) -> int:
    """``T + m_min``: the fewest present participants a noisy distance request may name.

    ``T`` = :attr:`CryptoParams.colluders_among_participants` (the contributors are
    participants: with a committee, not its ``T_c``), ``m_min`` the smallest reference set
    (at least 3). With at most ``T`` colluding contributors, at least ``m_min`` honest noise shares
    remain, the ``shares`` every distance ledger record assumes (module doc, "Colluders").
    """
    return params.colluders_among_participants + effective_minimum(params.min_reference_size)


def clip_reduced(reduced: NDArray[np.floating], l2_clip: float) -> NDArray[np.float64]:
    """The reduced prompt ``x_i`` scaled down to L2 norm ``<= rho`` (unchanged if inside)."""
    return clip_l2(reduced, l2_clip)


@dataclass(frozen=True)
class DistanceNoise:
    """The distance stage's distributed discrete Gaussian (module docstring).

    Attributes:
        noise_multiplier: ``z``.
        l2_clip: ``rho``, the L2 clip of a reduced prompt (real units).
        bits: the clustering field's ``bits``.
        reduced_dim: ``r``.
        min_reference: ``m_min``, the smallest reference set participants answer (floor 3).
        min_contributors: ``n_min``, the fewest contributors a request has (``m_min``).

    >>> noise = DistanceNoise(noise_multiplier=1.0, l2_clip=1.0, bits=4, reduced_dim=4,
    ...                       min_reference=3, min_contributors=3)
    >>> noise.radius, round(noise.unit)  # R = 16 + 1; 3 R^2 m_min^2
    (17.0, 7803)
    """

    noise_multiplier: float
    l2_clip: float
    bits: int
    reduced_dim: int
    min_reference: int
    min_contributors: int

    def __post_init__(self) -> None:
        for name in ("noise_multiplier", "l2_clip"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ParameterError(name, f"must be a number, not {value!r}")
            if not (math.isfinite(value) and value > 0):
                raise ParameterError(name, f"must be a finite number > 0, not {value}")
        for name, low in (
            ("bits", 0),
            ("reduced_dim", 1),
            ("min_reference", 1),
            ("min_contributors", 1),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < low:
                raise ParameterError(name, f"must be an int >= {low}, not {value!r}")
        sigma2 = self.share_sigma2
        if sigma2 < Fraction(MIN_SHARE_SIGMA) ** 2 or sigma2 > MAX_SIGMA2:
            raise ParameterError(
                "dp.distance_noise_multiplier",
                f"gives a per-share sigma of {math.sqrt(sigma2):.3g} decoded units; it must be "
                f"in [{MIN_SHARE_SIGMA}, 2**40] (lower the clustering field's bits, "
                "dp.distance_l2_clip or the multiplier)",
            )

    @classmethod
    def for_params(
        cls, params: CryptoParams, *, noise_multiplier: float, l2_clip: float
    ) -> DistanceNoise:
        """The noise of a federation with ``params``; refuses a field it could overflow."""
        spec = params.clustering_field
        floor = effective_minimum(params.min_reference_size)
        needed = noisy_contributor_floor(params)
        if params.n_participants < needed:
            raise ParameterError(
                "dp.distance_noise_multiplier",
                f"needs at least T + {floor} = {needed} participants "
                f"(T = {params.colluders_among_participants} "
                f"colluders can subtract their own noise shares; {floor} honest ones must "
                f"remain), but the federation has N = {params.n_participants}",
            )
        try:
            noise = cls(
                noise_multiplier=noise_multiplier,
                l2_clip=l2_clip,
                bits=spec.bits,
                reduced_dim=params.reduced_dim,
                min_reference=floor,
                min_contributors=floor,
            )
        except ParameterError as err:
            if err.parameter != "dp.distance_noise_multiplier":
                raise
            safe = distance_noise_bits(params, noise_multiplier=noise_multiplier, l2_clip=l2_clip)
            raise ParameterError(
                "clustering_field.bits",
                f"= {spec.bits} puts the distance noise out of the sampler's range ({err}); "
                f"the largest safe value is {safe}",
            ) from None
        peak = _noisy_peak(params, noise.share_sigma)
        if peak >= spec.half:
            safe = distance_noise_bits(params, noise_multiplier=noise_multiplier, l2_clip=l2_clip)
            raise ParameterError(
                "clustering_field.bits",
                f"= {spec.bits} lets a noisy decoded distance reach data + {NOISE_TAIL}*sqrt(N)"
                f"*sigma_share = {peak:.4g} >= (p-1)/2 = {spec.half}; with distance noise "
                f"z = {noise_multiplier} the largest safe value is {safe}",
            )
        return noise

    @property
    def radius(self) -> float:
        """``R``: the L2 bound of a quantized, clipped reduced prompt."""
        return quantized_radius(l2_clip=self.l2_clip, bits=self.bits, reduced_dim=self.reduced_dim)

    @property
    def unit(self) -> float:
        """``3 R^2 m_min^2``: the largest change of one point-centre value of a smallest
        set (``a`` outside it), the unit ``z`` multiplies."""
        return 3.0 * self.radius**2 * self.min_reference**2

    @property
    def share_sigma2(self) -> Fraction:
        """``sigma^2 >= (z * unit)^2 / n_min``, exact, in decoded units."""
        return lattice_sigma2(self.noise_multiplier * self.unit, shares=self.min_contributors)

    @property
    def share_sigma(self) -> float:
        """``sigma`` as a float rounded *down* (what the ledger may assume, never more)."""
        return math.nextafter(math.nextafter(math.sqrt(float(self.share_sigma2)), 0.0), 0.0)

    def share(self, length: int, *, rng: RandomSource) -> NDArray[np.int64]:
        """One contributor's noise for ``length`` output slots: ``N_Z(0, sigma^2)`` each."""
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise ParameterError("length", f"must be an int >= 1, not {length!r}")
        return discrete_gaussian(self.share_sigma2, length, rng=rng)

    def point_noise(self, refs: ReferenceSets, *, rng: RandomSource) -> NDArray[np.float64]:
        """What the noise does to ``D`` (real units), shape (n, sets): every present
        participant's share, summed per slot and scaled by ``1 / (s^2 m_S^2)`` as decoding
        scales the value (for benchmarks that replay the mechanism on plaintext distances)."""
        n, sets = len(refs.participants), refs.sets
        total = np.zeros(n * len(sets), dtype=np.int64)
        for _ in refs.participants:
            total += self.share(n * len(sets), rng=rng)
        sizes = np.array([len(m) for m in sets], dtype=np.float64)
        scale = float(1 << self.bits) ** 2 * sizes**2
        return total.reshape(n, len(sets)).astype(np.float64) / scale[None, :]

    def sensitivity(self, refs: ReferenceSets) -> float:
        """:func:`distance_sensitivity` of ``refs`` at this noise's radius."""
        return distance_sensitivity(refs, self.radius)

    def rho(self, refs: ReferenceSets) -> float:
        """zCDP ``rho`` of one noisy distance stage answering ``refs``."""
        return discrete_gaussian_rho(
            l2_sensitivity=self.sensitivity(refs),
            sigma=self.share_sigma,
            shares=self.min_contributors,
            dimension=refs.result_length,
        )

    def record(
        self,
        *,
        federation_id: str,
        round: int,
        refs: ReferenceSets,
        participants: Sequence[ParticipantId] | None = None,
    ) -> LedgerRecord:
        """The ledger record of one noisy distance stage (module docstring, "Accounting").

        ``participants``: the ids to name (default: ``refs.participants``).
        """
        who = tuple(refs.participants if participants is None else participants)
        return LedgerRecord(
            federation_id=federation_id,
            round=round,
            kind="distance",
            participants=who,
            sigma=self.share_sigma,
            sensitivity=self.sensitivity(refs),
            mechanism="distributed_discrete_gaussian",
            shares=self.min_contributors,
            dimension=refs.result_length,
        )

    def planned_record(
        self,
        *,
        federation_id: str,
        round: int,
        participants: Sequence[int],
        clusters: Sequence[Sequence[int]],
    ) -> LedgerRecord:
        """A record that bounds the round's distance release, for the budget check at the
        round's start (the request is fixed only after sharing): the sensitivity of
        :func:`distance_sensitivity_bound` and the dimension of ``n`` participants answering
        every cluster and a probe of each, ``2 n C + C (C - 1) / 2``. Every request of the
        round costs at most this record's epsilon; the ledger then records the exact one."""
        present = set(participants)
        nonempty = [m for m in clusters if present.intersection(m)]
        c = len(nonempty)
        return LedgerRecord(
            federation_id=federation_id,
            round=round,
            kind="distance",
            participants=tuple(sorted(present)),
            sigma=self.share_sigma,
            sensitivity=distance_sensitivity_bound(participants, nonempty, self.radius),
            mechanism="distributed_discrete_gaussian",
            shares=self.min_contributors,
            dimension=max(1, 2 * len(participants) * c + c * (c - 1) // 2),
        )


def _noisy_peak(params: CryptoParams, share_sigma: float) -> float:
    spec = params.clustering_field
    quantum = spec.quantum_bound()
    n = params.n_participants
    chunk = params.clustering_chunk
    data = max(_point_peak(n, quantum, chunk), _centre_peak(n, quantum, chunk))
    return data + NOISE_TAIL * math.sqrt(n) * share_sigma


def distance_noise_bits(params: CryptoParams, *, noise_multiplier: float, l2_clip: float) -> int:
    """Largest clustering ``bits`` whose field holds the noisy distances (module docstring)."""
    spec = params.clustering_field
    floor = effective_minimum(params.min_reference_size)
    best = -1
    for bits in range(spec.bits + 1):
        trial = dataclasses.replace(params, clustering_field=dataclasses.replace(spec, bits=bits))
        try:
            noise = DistanceNoise(
                noise_multiplier=noise_multiplier,
                l2_clip=l2_clip,
                bits=bits,
                reduced_dim=params.reduced_dim,
                min_reference=floor,
                min_contributors=floor,
            )
        except ParameterError:
            continue
        if _noisy_peak(trial, noise.share_sigma) >= spec.half:
            break
        best = bits
    if best < 0:
        raise ParameterError(
            "dp.distance_noise_multiplier",
            f"= {noise_multiplier} does not fit GF({spec.prime}) with N = "
            f"{params.n_participants} at any clustering bits <= {spec.bits}",
        )
    return best


def with_distance_noise_headroom(
    params: CryptoParams, *, noise_multiplier: float, l2_clip: float
) -> CryptoParams:
    """``params`` with the clustering ``bits`` lowered (if needed) to hold the noise."""
    bits = distance_noise_bits(params, noise_multiplier=noise_multiplier, l2_clip=l2_clip)
    spec = params.clustering_field
    if bits >= spec.bits:
        return params
    return dataclasses.replace(params, clustering_field=dataclasses.replace(spec, bits=bits))
