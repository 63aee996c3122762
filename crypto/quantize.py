"""Fixed-point quantization of real vectors into GF(p) and back (DESIGN.md section 2).

``q(x) = round(s * clip(x, -B, B))`` with ``s = 2**bits``; negative integers ``v`` are
stored as ``p - |v|``. Dequantization lifts ``v > (p-1)/2`` to ``v - p`` and divides by
``s**degree`` (``degree = 2`` after a degree-2 computation such as a squared distance).

Rounding is to nearest (ties to even) by default. Stochastic rounding
(``floor(s*x + u)``, ``u ~ U[0, 1)`` from an injected :class:`~crypto.rng.RandomSource`)
is unbiased, ``E[q(x)] = s*x``, which keeps a sum of many quantized updates unbiased.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike, NDArray

from secfpp.crypto.errors import ParameterError
from secfpp.crypto.field import FieldArray, PrimeField
from secfpp.crypto.rng import RandomSource

__all__ = ["dequantize", "lift", "quantize", "quantize_integers"]


def quantize_integers(
    x: ArrayLike, *, bits: int, clip: float, rng: RandomSource | None = None
) -> NDArray[np.int64]:
    """Signed integers ``round(s * clip(x, -B, B))``, before any field is involved.

    Args:
        x: real array of any shape (float); NaN or infinite entries are refused.
        bits: fractional bits, scale ``s = 2**bits``, ``0 <= bits <= 52``.
        clip: the clip bound ``B > 0``; entries are clipped to ``[-B, B]`` first.
        rng: if given, stochastic rounding ``floor(s x + u)`` with this randomness
            (each entry moves by at most one unit, ``|q - s x| <= 1``, strictly less
            but for float rounding); else round to nearest.

    Returns:
        int64 array of the same shape, entries in ``[-ceil(s B), ceil(s B)]``.

    >>> quantize_integers([0.5, -0.25, 3.0], bits=2, clip=1.0).tolist()
    [2, -1, 4]
    """
    arr = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(arr)):
        raise ParameterError("x", "must contain only finite values (found NaN or infinity)")
    if not clip > 0:
        raise ParameterError("clip", f"must be positive, not {clip}")
    if not 0 <= bits <= 52:
        raise ParameterError("bits", f"must be in [0, 52], not {bits}")
    scaled = np.clip(arr, -clip, clip) * float(1 << bits)
    ints = np.rint(scaled) if rng is None else np.floor(scaled + rng.uniform(scaled.shape))
    return ints.astype(np.int64)


def quantize(
    x: ArrayLike,
    field: PrimeField,
    *,
    bits: int,
    clip: float,
    rng: RandomSource | None = None,
) -> FieldArray:
    """Quantize real values into field elements.

    Args:
        x: real array of any shape (float); NaN or infinite entries are refused.
        field: the target field GF(p).
        bits: fractional bits, scale ``s = 2**bits``.
        clip: the clip bound ``B > 0``; entries are clipped to ``[-B, B]`` first.
        rng: if given, stochastic rounding with this randomness; else round to nearest.

    Returns:
        int64 array of the same shape with entries in ``[0, p)``.
    """
    ints = quantize_integers(x, bits=bits, clip=clip, rng=rng)
    if (1 << bits) * clip >= field.half:
        raise ParameterError(
            "bits", f"gives s*B = {(1 << bits) * clip} >= (p-1)/2 = {field.half}: values would wrap"
        )
    return field.asarray(ints)


def lift(values: FieldArray, field: PrimeField) -> NDArray[np.int64]:
    """Signed integers from field elements: ``v > (p-1)/2`` becomes ``v - p``."""
    return field.centered(np.asarray(values, dtype=np.int64))


def dequantize(
    values: FieldArray, field: PrimeField, *, bits: int, degree: int = 1
) -> NDArray[np.float64]:
    """Real values from field elements: ``lift(v) / s**degree``."""
    if degree < 0:
        raise ParameterError("degree", f"must be non-negative, not {degree}")
    scale = float(2 ** (bits * degree))
    return lift(values, field).astype(np.float64) / scale
