"""Cluster-wise secure aggregation (DESIGN.md section 5).

Participant side: an update ``g_i`` (real, shape ``n_ctx x d`` flattened to length
``D``) is clipped in L2 norm and per entry to ``[-B, B]``, quantized with stochastic
rounding (unbiased) to integers ``q_i`` and shared with the aggregation LCC code. For
each member set ``M_c`` participant ``j`` uploads ``sum_{i in M_c} share_j(g_i)``
(length ``L``).

The enforced bound. Stochastic rounding moves each entry by up to one unit, so it
can grow the L2 norm by up to ``sqrt(D)`` units, i.e. ``sqrt(D)/s`` in real units
(:func:`rounding_margin`). :func:`quantize_update` therefore clips to
``C - sqrt(D)/s`` before rounding, then checks ``||q_i||_2 <= C s`` exactly in
integers (and, should float rounding ever break it, scales ``q_i`` down exactly). So
``||q_i||_2 <= C s`` always holds: ``C`` (real units) is both the clip and the DP
sensitivity of a cluster sum.

With distributed DP (:class:`crypto.dp.distributed.DistributedNoise`) the participant
adds its discrete Gaussian share to ``q_i`` before sharing.

Coordinator side: the cluster sum decodes from ``K+T`` results (degree 1); flattened,
cut to length ``D`` and lifted it is the exact integer sum of the (noisy) quantized
updates (:func:`decode_cluster_sum`); divided by ``s`` and by the number of
contributors it is the mean update (:func:`decode_cluster_mean`), optionally with GDP
noise added exactly on the integer sum first.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

from secfpp.crypto.dp.distributed import DistributedNoise
from secfpp.crypto.dp.mechanisms import discrete_gaussian_mechanism, lattice_sigma2
from secfpp.crypto.errors import ParameterError
from secfpp.crypto.field import FieldArray, PrimeField
from secfpp.crypto.lcc import Decoded, LagrangeCode
from secfpp.crypto.params import FieldSpec
from secfpp.crypto.quantize import lift, quantize_integers
from secfpp.crypto.rng import RandomSource

__all__ = [
    "clip_update",
    "decode_cluster_mean",
    "decode_cluster_sum",
    "enforce_l2_bound",
    "member_sums",
    "prepare_update",
    "quantize_update",
    "rounding_margin",
]


def clip_update(
    update: NDArray[np.float64], *, l2_clip: float, entry_clip: float
) -> NDArray[np.float64]:
    """Scale ``update`` to L2 norm at most ``l2_clip``, then clip entries to the bound."""
    flat = np.asarray(update, dtype=np.float64).reshape(-1)
    if not np.all(np.isfinite(flat)):
        raise ParameterError("update", "must contain only finite values")
    norm = float(np.linalg.norm(flat))
    if norm > l2_clip:
        flat = flat * (l2_clip / norm)
    return np.clip(flat, -entry_clip, entry_clip)


def rounding_margin(length: int, spec: FieldSpec) -> float:
    """``sqrt(D) / s``: the most stochastic rounding adds to the L2 norm (real units).

    >>> from secfpp.crypto.params import FieldSpec
    >>> rounding_margin(16, FieldSpec(prime=2**31 - 1, bits=2, clip=1.0))
    1.0
    """
    if length < 0:
        raise ParameterError("length", f"must be >= 0, not {length}")
    return math.sqrt(length) / spec.scale


def _squared_norm(q: NDArray[np.int64]) -> int:
    """``||q||_2^2`` exactly, as a Python int: in int64 when ``max|q|**2 * len(q)`` stays
    below ``2**63`` (quantized updates always do), else in Python integers."""
    flat = q.reshape(-1)
    if not flat.size:
        return 0
    if flat.dtype.kind in "iu":
        peak = max(abs(int(flat.max())), abs(int(flat.min())))
        if peak * peak * flat.size < 2**63:
            wide = flat.astype(np.int64, copy=False)
            return int(np.dot(wide, wide))
    exact = flat.astype(object)
    return int(np.dot(exact, exact))


def enforce_l2_bound(q: NDArray[np.int64], bound: Fraction) -> NDArray[np.int64]:
    """``q`` if ``||q||_2 <= bound`` (checked exactly), else ``q`` scaled down exactly.

    The scaled vector is ``trunc(q_j * a / b)`` (toward zero) with ``a / b < bound /
    ||q||_2`` rational, so its norm is below ``bound``. Units: quantized integers.

    >>> enforce_l2_bound(np.array([3, 4]), Fraction(5)).tolist()
    [3, 4]
    >>> v = enforce_l2_bound(np.array([3, 4]), Fraction(4))
    >>> int(v @ v) <= 16
    True
    """
    if bound < 0:
        raise ParameterError("bound", f"must be >= 0, not {bound}")
    squared = _squared_norm(q)
    if squared * bound.denominator**2 <= bound.numerator**2:
        return q
    num = bound.numerator
    den = bound.denominator * (math.isqrt(squared) + 1)  # > bound.den * ||q||
    flat = q.reshape(-1).astype(object)
    scaled = np.array([(abs(v) * num // den) * (1 if v >= 0 else -1) for v in flat], dtype=np.int64)
    return scaled.reshape(q.shape)


def quantize_update(
    update: NDArray[np.float64], spec: FieldSpec, *, l2_clip: float, rng: RandomSource
) -> NDArray[np.int64]:
    """Clip and stochastically round ``update`` to integers ``q`` with ``||q||_2 <= C s``.

    Returns signed int64 of length ``update.size`` in quantized units (``s = 2**bits``),
    entries in ``[-ceil(s B), ceil(s B)]``; see the module docstring for the bound.
    """
    flat = np.asarray(update, dtype=np.float64).reshape(-1)
    margin = rounding_margin(flat.size, spec)
    if not (math.isfinite(l2_clip) and l2_clip > margin):
        raise ParameterError(
            "l2_clip",
            f"= {l2_clip} must exceed the rounding margin sqrt(D)/s = {margin:.4g} "
            f"(D = {flat.size}, bits = {spec.bits}); raise l2_clip or bits",
        )
    clipped = clip_update(flat, l2_clip=l2_clip - margin, entry_clip=spec.clip)
    q = quantize_integers(clipped, bits=spec.bits, clip=spec.clip, rng=rng)
    return enforce_l2_bound(q, Fraction(l2_clip) * spec.scale)


def prepare_update(
    update: NDArray[np.float64],
    spec: FieldSpec,
    *,
    l2_clip: float,
    rng: RandomSource,
    noise: DistributedNoise | None = None,
) -> FieldArray:
    """Field vector to share: :func:`quantize_update`, plus the participant's noise share.

    ``noise`` (distributed DP) must be the federation's, for this ``spec`` and
    ``l2_clip``; its share ``N_Z(0, sigma_i^2)`` per entry is drawn from ``rng``.
    Length ``update.size``.
    """
    q = quantize_update(update, spec, l2_clip=l2_clip, rng=rng)
    if noise is not None:
        if noise.bits != spec.bits or noise.l2_clip != l2_clip:
            raise ParameterError(
                "noise",
                f"is calibrated for bits = {noise.bits}, l2_clip = {noise.l2_clip}, not "
                f"bits = {spec.bits}, l2_clip = {l2_clip}",
            )
        q = q + noise.share(q.shape, rng=rng)
    return spec.field.asarray(q)


def member_sums(
    field: PrimeField,
    shares: Mapping[int, FieldArray],
    member_sets: Sequence[Sequence[int]],
) -> FieldArray:
    """``sum_{i in M} share_j(g_i)`` for each member set ``M``; shape (len(sets), L)."""
    out = []
    for members in member_sets:
        missing = [i for i in members if i not in shares]
        if missing:
            raise ParameterError("shares", f"lacks the shares of participants {missing}")
        if not members:
            raise ParameterError("member_sets", "must not contain an empty set")
        total = _narrow_sum(field, shares, members) if field.narrow else None
        if total is None:
            rows = np.vstack([field.check(shares[i], f"shares[{i}]") for i in members])
            total = field.sum(rows, axis=0)
        out.append(total)
    return np.vstack(out)


def _narrow_sum(
    field: PrimeField, shares: Mapping[int, FieldArray], members: Sequence[int]
) -> FieldArray | None:
    """``sum_{i in members} shares[i] mod p`` for ``p < 2**31`` by one running total.

    Every row is added once into an ``int64`` total (exact for fewer than ``2**32``
    rows of entries below ``2**31``) while a running minimum and maximum check that
    every entry is a field element, without stacking the rows (a member sums a
    thousand shares). Returns None when the rows are not all 1-D ``int64`` arrays of
    one length, and raises the error of :meth:`PrimeField.check` naming the first
    offending participant when an entry is out of range.
    """
    rows = [shares[i] for i in members]
    shape = np.shape(rows[0])
    if len(shape) != 1 or len(rows) >= 2**32:
        return None
    if not all(
        isinstance(r, np.ndarray) and r.dtype == np.int64 and r.shape == shape for r in rows
    ):
        return None
    total = np.zeros(shape, dtype=np.int64)
    low = rows[0].copy()
    high = rows[0].copy()
    for r in rows:
        total += r
        np.minimum(low, r, out=low)
        np.maximum(high, r, out=high)
    if shape[0] and (int(low.min()) < 0 or int(high.max()) >= field.prime):
        for i in members:
            field.check(shares[i], f"shares[{i}]")
    return np.mod(total, field.prime)


def decode_cluster_sum(
    code: LagrangeCode, results: Mapping[int, FieldArray], *, length: int
) -> tuple[NDArray[np.int64], Decoded]:
    """The lifted integer sum (quantized units, length ``length``) from member-set sums.

    ``results`` maps participant index to its member-set sum for this cluster (a
    field vector of length ``code.chunk_length(length)``).
    """
    if not results:
        raise ParameterError("results", "must hold at least one participant's result, not none")
    first = next(iter(results.values()))
    if length < 1 or code.chunk_length(length) != len(first):
        raise ParameterError("length", f"= {length} does not match the result vectors")
    decoded = code.decode(results, degree=1)
    flat = decoded.values.reshape(-1)[:length]
    return lift(flat, code.field), decoded


def decode_cluster_mean(
    code: LagrangeCode,
    results: Mapping[int, FieldArray],
    *,
    length: int,
    spec: FieldSpec,
    contributors: int,
    noise_sigma: float | None = None,
    rng: RandomSource | None = None,
) -> tuple[NDArray[np.float64], Decoded]:
    """Mean of ``contributors`` quantized updates from participants' member-set sums.

    With ``noise_sigma`` (GDP, real units of the mean, e.g.
    :func:`crypto.dp.mechanisms.gdp_sigma`), discrete Gaussian noise of parameter
    ``lattice_sigma2(noise_sigma, scale=s * contributors) >= (noise_sigma s m)^2`` is
    added to the integer sum before dividing, drawn from ``rng``: the released mean is
    a post-processing of an exact discrete Gaussian release of the sum, whose
    sensitivity is the enforced ``C s``.
    """
    if contributors < 1:
        raise ParameterError("contributors", f"must be >= 1, not {contributors}")
    if noise_sigma is not None and rng is None:
        raise ParameterError("rng", "is required when noise_sigma is given")
    total, decoded = decode_cluster_sum(code, results, length=length)
    if noise_sigma is not None and rng is not None:
        sigma2 = lattice_sigma2(noise_sigma, scale=spec.scale * contributors)
        total = discrete_gaussian_mechanism(total, sigma2=sigma2, rng=rng)
    # Same float operations as dequantize(...) / contributors: noiseless means are unchanged.
    return total.astype(np.float64) / float(spec.scale) / contributors, decoded
