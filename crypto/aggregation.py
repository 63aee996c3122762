"""Cluster-wise secure aggregation (DESIGN.md section 5).

Participant side: an update ``g_i`` (real, shape ``n_ctx x d`` flattened to length
``D``) is clipped in L2 norm to ``C`` and per entry to ``[-B, B]``, quantized with
stochastic rounding (unbiased) and shared with the aggregation LCC code. For each member
set ``M_c`` participant ``j`` uploads ``sum_{i in M_c} share_j(g_i)`` (length ``L``).

Coordinator side: the cluster sum decodes from ``K+T`` results (degree 1); flattened,
cut to length ``D``, lifted and divided by ``s`` it is the exact sum of the quantized
updates; divided by the number of contributors it is the mean update.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from crypto.errors import ParameterError
from crypto.field import FieldArray, PrimeField
from crypto.lcc import Decoded, LagrangeCode
from crypto.params import FieldSpec
from crypto.quantize import dequantize, quantize
from crypto.rng import RandomSource

__all__ = ["clip_update", "decode_cluster_mean", "member_sums", "prepare_update"]


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


def prepare_update(
    update: NDArray[np.float64], spec: FieldSpec, *, l2_clip: float, rng: RandomSource
) -> FieldArray:
    """Clip and quantize (stochastic rounding) an update for sharing; length ``update.size``."""
    clipped = clip_update(update, l2_clip=l2_clip, entry_clip=spec.clip)
    return quantize(clipped, spec.field, bits=spec.bits, clip=spec.clip, rng=rng)


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
        rows = np.vstack([field.check(shares[i], f"shares[{i}]") for i in members])
        out.append(field.sum(rows, axis=0))
    return np.vstack(out)


def decode_cluster_mean(
    code: LagrangeCode,
    results: Mapping[int, FieldArray],
    *,
    length: int,
    spec: FieldSpec,
    contributors: int,
) -> tuple[NDArray[np.float64], Decoded]:
    """Mean of ``contributors`` quantized updates from participants' member-set sums."""
    if contributors < 1:
        raise ParameterError("contributors", f"must be >= 1, not {contributors}")
    if length < 1 or code.chunk_length(length) != len(next(iter(results.values()))):
        raise ParameterError("length", f"= {length} does not match the result vectors")
    decoded = code.decode(results, degree=1)
    flat = decoded.values.reshape(-1)[:length]
    total = dequantize(flat, code.field, bits=spec.bits)
    return total / contributors, decoded
