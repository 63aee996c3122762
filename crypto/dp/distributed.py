"""Distributed DP for cluster sums: discrete Gaussian shares added before secret sharing.

Setting (beyond the SecFPP paper; the DDGauss mechanism of Kairouz, Liu & Steinke,
ICML 2021). Every participant quantizes its update to integers ``q_i`` with
``||q_i||_2 <= C s`` enforced exactly (:func:`crypto.aggregation.quantize_update`,
``s = 2^bits``, ``C`` the L2 clip), adds its own noise ``e_i ~ N_Z(0, sigma_i^2)^D`` and
secret-shares ``q_i + e_i``. The coordinator decodes only ``sum_{i in M} (q_i + e_i)``:
it never holds the noiseless sum, and no extra noise is needed at decode time.

Calibration to dropouts. A member set ``M`` that a participant agrees to sum over has
at least ``n_min = min_aggregation_size`` members (the participant refuses smaller
sets, :func:`crypto.refusal.check_aggregation_request`, and sets are formed only from
participants who delivered their shares, so a dropout can only remove a member before
its noise is in, never after). Each share therefore gets
``sigma_i^2 = (z C s)^2 / n_min`` (:func:`crypto.dp.mechanisms.lattice_sigma2`), and
every decodable sum holds at least ``n_min`` shares: noise variance at least
``(z C s)^2`` in quantized units, ``(z C)^2`` in real units, on a sum of L2 sensitivity
``C`` (add/remove one contributor's update, which is replaced by zero; its noise share
stays). A sum with ``m > n_min`` shares has more noise; that is post-processing.

Accounting (conservative, rigorous). One cluster sum per round is recorded as a
``"distributed_discrete_gaussian"`` :class:`~crypto.dp.ledger.LedgerRecord` with
``shares = n_h`` (the honest ``n_min - T``, "Colluders" below), ``sigma = sigma_i``,
``sensitivity = C s`` and ``dimension = D``; its
``rho`` is KLS 2021 Proposition 14 (:func:`crypto.dp.accounting.discrete_gaussian_rho`):
``rho = (1/z'^2 + tau-terms) / 2`` with ``z' = sqrt(n_h) sigma_i / (C s) >= z``; for
``sigma_i`` of a few units or more the ``tau`` correction is below ``1e-300`` and
``rho = 1 / (2 z^2)``, the continuous Gaussian's Rényi curve. The ledger composes
these zCDP releases with RDP (dp-accounting's ``ZCDpEvent``).

Colluders. ``T`` participants who collude with the coordinator (:attr:`CryptoParams.
colluders_among_participants`: with a committee, the ``T`` of all participants, not the
committee's ``T_c``) know their own noise shares and can subtract them from a sum they are in,
leaving ``n_min - T`` honest shares. Shares are therefore calibrated to the honest ones:
``n_h = n_min - T`` (:func:`honest_shares`) replaces ``n_min`` above, so
``sigma_i^2 = (z C s)^2 / n_h`` and every decodable sum keeps noise of variance at least
``(z C s)^2`` after the colluders' shares are removed; the ledger records ``shares = n_h``.
A federation with ``min_aggregation_size <= T`` has no honest share to count on and is
refused. The cost is ``sqrt(n_min / n_h)`` times more noise per share (and in the decoded
sum) than the collusion-free calibration. The coordinator equivocating about member sets
is a protocol matter (docs/protocol.md).

Field headroom. The decoded sum must not wrap: with ``N`` participants,
``N ceil(s B) + NOISE_TAIL sqrt(N) sigma_i < (p-1)/2`` (a discrete Gaussian is
sub-Gaussian with parameter ``sigma``, so the sum exceeds ``NOISE_TAIL`` standard
deviations with probability below ``2 exp(-NOISE_TAIL^2 / 2) ~ 4e-22`` per entry).
:func:`distributed_bits` picks the largest ``bits`` that fits; :meth:`DistributedNoise.
for_params` refuses parameters that do not.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.dp.accounting import discrete_gaussian_rho
from secfpp.crypto.dp.discrete import MAX_SIGMA2, discrete_gaussian
from secfpp.crypto.dp.ledger import LedgerRecord, ParticipantId
from secfpp.crypto.dp.mechanisms import MIN_SHARE_SIGMA, lattice_sigma2
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.params import CryptoParams, FieldSpec
from secfpp.crypto.rng import RandomSource

__all__ = [
    "NOISE_TAIL",
    "DistributedNoise",
    "distributed_bits",
    "honest_shares",
    "with_distributed_headroom",
]

#: Standard deviations of summed noise the field must hold (see the module docstring).
NOISE_TAIL = 10


def _peak(spec: FieldSpec, n_participants: int, share_sigma: float) -> float:
    """Largest magnitude a decoded sum may reach: data plus ``NOISE_TAIL`` noise stds."""
    return n_participants * spec.quantum_bound() + NOISE_TAIL * math.sqrt(n_participants) * (
        share_sigma
    )


def honest_shares(params: CryptoParams) -> int:
    """``n_h = min_aggregation_size - T``: the fewest noise shares of a decodable sum that
    its ``T`` colluders cannot subtract (module docstring, "Colluders").

    Raises:
        ParameterError: ``min_aggregation_size <= T`` (names the smallest safe value).
    """
    colluders = params.colluders_among_participants
    honest = params.min_aggregation_size - colluders
    if honest < 1:
        raise ParameterError(
            "min_aggregation_size",
            f"= {params.min_aggregation_size} leaves no honest noise share in a sum whose "
            f"T = {colluders} colluders subtract theirs: with distributed DP noise it "
            f"must be at least T + 1 = {colluders + 1} (or lower the collusion "
            "fraction the federation tolerates)",
        )
    return honest


@dataclass(frozen=True)
class DistributedNoise:
    """The distributed discrete Gaussian of one federation (module docstring).

    Attributes:
        noise_multiplier: ``z``; every decodable cluster sum carries noise of std at
            least ``z * l2_clip`` (real units).
        l2_clip: ``C``, the L2 bound enforced on each quantized update (real units).
        bits: the aggregation field's ``bits`` (grid ``s = 2**bits`` per real unit).
        min_contributors: ``n_h``, the fewest honest shares a decodable sum holds
            (:func:`honest_shares`: ``min_aggregation_size - T``).

    >>> noise = DistributedNoise(noise_multiplier=1.0, l2_clip=10.0, bits=16, min_contributors=4)
    >>> round(noise.share_sigma)  # (1 * 10 * 2**16) / sqrt(4)
    327680
    """

    noise_multiplier: float
    l2_clip: float
    bits: int
    min_contributors: int

    def __post_init__(self) -> None:
        for name in ("noise_multiplier", "l2_clip"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise ParameterError(name, f"must be a number, not {value!r}")
            if not (math.isfinite(value) and value > 0):
                raise ParameterError(name, f"must be a finite number > 0, not {value}")
        if (
            isinstance(self.bits, bool)
            or not isinstance(self.bits, int)
            or not 0 <= self.bits <= 52
        ):
            raise ParameterError("bits", f"must be an int in [0, 52], not {self.bits!r}")
        n = self.min_contributors
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ParameterError("min_contributors", f"must be an int >= 1, not {n!r}")
        sigma2 = self.share_sigma2
        if sigma2 < Fraction(MIN_SHARE_SIGMA) ** 2 or sigma2 > MAX_SIGMA2:
            raise ParameterError(
                "noise_multiplier",
                f"gives a per-share sigma of {math.sqrt(sigma2):.3g} quantized units; it must "
                f"be in [{MIN_SHARE_SIGMA}, 2**40] (change noise_multiplier or bits)",
            )

    @classmethod
    def for_params(cls, params: CryptoParams, *, noise_multiplier: float) -> DistributedNoise:
        """The noise of a federation with ``params``; refuses a field it could overflow."""
        spec = params.aggregation_field
        noise = cls(
            noise_multiplier=noise_multiplier,
            l2_clip=params.l2_clip,
            bits=spec.bits,
            min_contributors=honest_shares(params),
        )
        peak = _peak(spec, params.n_participants, noise.share_sigma)
        if peak >= spec.half:
            safe = distributed_bits(params, noise_multiplier=noise_multiplier)
            raise ParameterError(
                "aggregation_field.bits",
                f"= {spec.bits} lets a noisy sum of N = {params.n_participants} updates reach "
                f"N*s*B + {NOISE_TAIL}*sqrt(N)*sigma_share = {peak:.4g} >= (p-1)/2 = "
                f"{spec.half}; with distributed noise z = {noise_multiplier} the largest safe "
                f"value is {safe}",
            )
        return noise

    @property
    def scale(self) -> int:
        """``s = 2**bits``: quantized units per real unit."""
        return 1 << self.bits

    @property
    def share_sigma2(self) -> Fraction:
        """``sigma_i^2 >= (z C s)^2 / n_min``, exact, in quantized units."""
        return lattice_sigma2(
            self.noise_multiplier * self.l2_clip, scale=self.scale, shares=self.min_contributors
        )

    @property
    def share_sigma(self) -> float:
        """``sigma_i`` as a float rounded *down* (what the ledger may assume, never more)."""
        return math.nextafter(math.nextafter(math.sqrt(float(self.share_sigma2)), 0.0), 0.0)

    @property
    def sensitivity(self) -> float:
        """``C * s``: the L2 bound of one quantized update (quantized units)."""
        return self.l2_clip * self.scale

    def share(self, shape: int | tuple[int, ...], *, rng: RandomSource) -> NDArray[np.int64]:
        """One participant's noise: ``N_Z(0, sigma_i^2)`` per entry, exactly (int64)."""
        return discrete_gaussian(self.share_sigma2, shape, rng=rng)

    def rho(self, dimension: int) -> float:
        """zCDP ``rho`` of one noisy cluster sum of ``dimension`` coordinates."""
        return discrete_gaussian_rho(
            l2_sensitivity=self.sensitivity,
            sigma=self.share_sigma,
            shares=self.min_contributors,
            dimension=dimension,
        )

    def record(
        self,
        *,
        federation_id: str,
        round: int,
        cluster_id: int,
        members: Sequence[ParticipantId],
        dimension: int,
    ) -> LedgerRecord:
        """The ledger record of one noisy cluster sum (module docstring, "Accounting")."""
        return LedgerRecord(
            federation_id=federation_id,
            round=round,
            kind="distributed",
            participants=tuple(members),
            sigma=self.share_sigma,
            sensitivity=self.sensitivity,
            cluster_id=cluster_id,
            mechanism="distributed_discrete_gaussian",
            shares=self.min_contributors,
            dimension=dimension,
        )


def distributed_bits(params: CryptoParams, *, noise_multiplier: float) -> int:
    """Largest aggregation ``bits`` whose field holds ``N`` noisy updates (module docstring).

    The data and the noise both scale with ``s``, so this is the largest ``s`` with
    ``N ceil(s B) + NOISE_TAIL sqrt(N) z C s / sqrt(n_h) < (p-1)/2``.
    """
    spec = params.aggregation_field
    honest = honest_shares(params)
    best = -1
    for bits in range(53):
        trial = dataclasses.replace(spec, bits=bits)
        try:
            noise = DistributedNoise(
                noise_multiplier=noise_multiplier,
                l2_clip=params.l2_clip,
                bits=bits,
                min_contributors=honest,
            )
        except ParameterError:
            continue  # below the smallest share sigma: more bits may still fit
        if _peak(trial, params.n_participants, noise.share_sigma) >= trial.half:
            break
        best = bits
    if best < 0:
        raise ParameterError(
            "noise_multiplier",
            f"= {noise_multiplier} does not fit GF({spec.prime}) with N = "
            f"{params.n_participants} at any bits",
        )
    return best


def with_distributed_headroom(params: CryptoParams, *, noise_multiplier: float) -> CryptoParams:
    """``params`` with the aggregation ``bits`` lowered (if needed) to hold the noise."""
    bits = distributed_bits(params, noise_multiplier=noise_multiplier)
    spec = params.aggregation_field
    if bits >= spec.bits:
        return params
    return dataclasses.replace(params, aggregation_field=dataclasses.replace(spec, bits=bits))
