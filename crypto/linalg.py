"""Vectorized exact linear algebra over GF(p): products, inverses, Lagrange matrices.

The decode path of :mod:`crypto.lcc` needs, for ``n`` received evaluations (``n`` up to a
few thousand), O(n**2) element-wise field operations to build its matrices and a few
products of those matrices with the long result vectors. Everything here is numpy on
``int64`` values in ``[0, p)``; no Python-level loop runs over matrix entries.

* :func:`mul` multiplies element-wise. ``p < 2**31``: one ``int64`` product and ``%``.
  ``p = 2**61 - 1`` (the clustering field): 32-bit limbs in ``uint64`` and the Mersenne
  reduction ``2**61 = 1``, about 20 numpy operations. Any other wide prime: exact Python
  integers through ``object`` arrays (correct, about 10x slower).
* :func:`matmul` multiplies matrices exactly for every prime ``p < 2**62`` with large
  float64 GEMMs on limbs: 2 times the work of a plain float product for ``p < 2**31``
  (:func:`crypto.field.narrow_product`), at most 9 times for wide primes
  (:func:`_wide_matmul`; fewer when one operand's entries are small).
* :func:`inverses` inverts arrays of nonzero elements: through a table when the values
  are small signed integers (differences of the LCC evaluation points, which are
  ``1..K+T+N``), otherwise with Montgomery's trick (one ``pow`` in all).
* :func:`barycentric_weights` and :func:`lagrange_matrix` (``M[j, k] = l_k(points[j])``,
  barycentric form) cost O(len(points) * len(nodes)) vectorized multiplications, and
  the weights only O(n * missing) for integer nodes that fill most of a window.
* :func:`field_sum`, :func:`mulsum`, :func:`times_pow2`, :func:`row_products`: exact sums,
  dot products, shifts and products along an axis.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import ArrayLike, NDArray

from secfpp.crypto.field import (
    FieldArray,
    PrimeField,
    narrow_product,
    prepare_narrow,
    scratch_buffer,
)

__all__ = [
    "MERSENNE_61",
    "barycentric_weights",
    "field_sum",
    "inverses",
    "lagrange_matrix",
    "matmul",
    "mul",
    "mulsum",
    "row_products",
    "times_pow2",
]

MERSENNE_61 = (1 << 61) - 1
_NARROW = 1 << 31
_U32 = np.uint64(0xFFFFFFFF)
_U29 = np.uint64((1 << 29) - 1)
_UM61 = np.uint64(MERSENNE_61)
_WIDE_BITS = 21  # three limbs of 21 bits cover |x| < 2**61 (_wide_matmul)
_LIMB_HALF_BITS = _WIDE_BITS - 1
_LIMB_HALF = 1 << _LIMB_HALF_BITS
_LIMB_MASK = (1 << _WIDE_BITS) - 1
# 3 limb pairs * 1365 inner rows * 2**20 * 2**21 < 2**53: float64 sums stay exact.
_INNER_BLOCK = 1365
_TILE_ELEMENTS = 1 << 20  # float64 entries of one stacked right-operand tile (8 MiB)
_TABLE_LIMIT = 1 << 16  # largest |value| inverted through a table
_EXACT = 1 << 53


def _as_field(values: ArrayLike, prime: int) -> FieldArray:
    arr = np.asarray(values)
    if arr.dtype == object:
        return np.asarray(np.mod(arr, prime), dtype=np.int64)
    return np.mod(arr.astype(np.int64, copy=False), prime)


def mul(a: ArrayLike, b: ArrayLike, prime: int) -> FieldArray:
    """``(a * b) mod p`` element-wise with broadcasting; entries must lie in ``[0, p)``."""
    if prime < _NARROW:
        return np.mod(np.multiply(a, b, dtype=np.int64), prime)
    if prime == MERSENNE_61:
        return _mul_mersenne_61(np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64))
    product = np.asarray(a, dtype=np.int64).astype(object) * np.asarray(b, dtype=np.int64)
    return np.asarray(product % prime, dtype=np.int64)


def _mul_mersenne_61(a: FieldArray, b: FieldArray) -> FieldArray:
    """``a * b mod (2**61 - 1)`` exactly in uint64.

    With ``a = a1 * 2**32 + a0`` (``a1 < 2**29``) and likewise ``b``:
    ``a*b = a1*b1 * 2**64 + (a1*b0 + a0*b1) * 2**32 + a0*b0`` and ``2**61 = 1`` give
    ``2**64 = 8``; every partial term stays below ``2**62`` and their sum below ``2**63``.
    """
    ua, ub = a.astype(np.uint64), b.astype(np.uint64)
    a0, a1 = ua & _U32, ua >> np.uint64(32)
    b0, b1 = ub & _U32, ub >> np.uint64(32)
    mid = a1 * b0 + a0 * b1  # < 2**62
    low = a0 * b0  # < 2**64
    s = (a1 * b1) << np.uint64(3)  # a1*b1*2**64 = a1*b1*8, below 2**61
    s += mid >> np.uint64(29)  # mid*2**32 = (mid>>29)*2**61 + (mid&(2**29-1))*2**32
    s += (mid & _U29) << np.uint64(32)
    s += low >> np.uint64(61)
    s += low & _UM61
    s = (s & _UM61) + (s >> np.uint64(61))
    s -= _UM61 * (s >= _UM61)
    return s.astype(np.int64)


def row_products(matrix: FieldArray, prime: int) -> FieldArray:
    """``prod(matrix, axis=-1) mod p`` by pairwise halving (log2 of the width rounds)."""
    x = np.asarray(matrix, dtype=np.int64)
    while x.shape[-1] > 1:
        if x.shape[-1] % 2:
            ones = np.ones((*x.shape[:-1], 1), dtype=np.int64)
            x = np.concatenate([x, ones], axis=-1)
        x = mul(x[..., 0::2], x[..., 1::2], prime)
    if x.shape[-1] == 0:
        return np.ones(x.shape[:-1], dtype=np.int64)
    return x[..., 0]


def inverses(values: ArrayLike, prime: int) -> FieldArray:
    """Element-wise inverses of nonzero field elements (any shape).

    Values whose centred representatives ``v`` (``|v| <= (p-1)/2``) are all small (at most
    ``2**16`` and four times the number of values) are looked up in a table of ``1/v``
    built with one multiplication per entry; otherwise they are inverted together with one
    ``pow`` and three products per value (Montgomery's trick).

    Raises:
        ZeroDivisionError: if any value is 0 mod p.
    """
    arr = _as_field(values, prime)
    if arr.size == 0:
        return arr
    if not arr.all():
        raise ZeroDivisionError("0 has no inverse in GF(p)")
    signed = np.where(arr > (prime - 1) // 2, arr - prime, arr)
    span = int(np.abs(signed).max())
    if span <= min(_TABLE_LIMIT, 4 * arr.size):
        # 1/v = -(p // v) * 1/(p mod v): one multiplication per table entry.
        small = [0, 1] + [0] * (span - 1)
        for v in range(2, span + 1):
            small[v] = (prime - prime // v) * small[prime % v] % prime
        positive = np.array(small, dtype=np.int64)
        negative = np.mod(-positive, prime)
        table = np.concatenate([negative[:0:-1], positive])
        looked_up: FieldArray = table[signed + span]
        return looked_up
    flat = [int(v) for v in arr.reshape(-1)]
    return np.array(_batch_inverse(flat, prime), dtype=np.int64).reshape(arr.shape)


def _batch_inverse(values: list[int], prime: int) -> list[int]:
    """Inverses of nonzero ``values`` with one ``pow`` and three products each (Montgomery)."""
    prefix = [1] * (len(values) + 1)
    for i, v in enumerate(values):
        prefix[i + 1] = prefix[i] * v % prime
    inv = pow(prefix[-1], prime - 2, prime)  # 1 / (v_0 ... v_{n-1})
    out = [0] * len(values)
    for i in range(len(values) - 1, -1, -1):
        out[i] = inv * prefix[i] % prime
        inv = inv * values[i] % prime
    return out


def barycentric_weights(nodes: Sequence[int] | FieldArray, prime: int) -> FieldArray:
    """``w_k = 1 / prod_{m != k} (x_k - x_m)`` for distinct nodes ``x`` (shape (n,)).

    ``sum_k w_k g(x_k) = 0`` for every polynomial ``g`` of degree ``<= n-2``: the identity
    behind Reed-Solomon syndromes (:mod:`crypto.reed_solomon`). Nodes that are integers
    filling most of a window ``[a, b]`` (the LCC evaluation points, less dropouts) use
    ``prod_{j in [a, b], j != x} (x - j) = (-1)**(b-x) (x-a)! (b-x)!`` and divide out the
    ``M`` missing integers: O(n * M) multiplications. Otherwise the n x n matrix of
    differences is multiplied out: O(n**2).
    """
    x = _as_field(np.asarray(nodes, dtype=object), prime)
    if x.size == 0:
        return x
    low, high = int(x.min()), int(x.max())
    if high - low + 1 <= x.size + x.size // 2:
        present = np.zeros(high - low + 1, dtype=bool)
        present[x - low] = True
        if int(present.sum()) != x.size:
            raise ValueError("Argument 'nodes' must be distinct modulo p")
        missing = np.flatnonzero(~present) + low
        inv_fact = _inverse_factorials(high - low, prime)
        above = high - x
        w = mul(inv_fact[x - low], inv_fact[above], prime)
        w = np.where(above % 2 == 1, np.mod(-w, prime), w)  # (-1)**(b-x)
        return mul(w, row_products(np.mod(x[:, None] - missing[None, :], prime), prime), prime)
    diffs = np.mod(x[:, None] - x[None, :], prime)
    np.fill_diagonal(diffs, 1)
    if not diffs.all():
        raise ValueError("Argument 'nodes' must be distinct modulo p")
    return inverses(row_products(diffs, prime), prime)


def _inverse_factorials(top: int, prime: int) -> FieldArray:
    """``1/0!, 1/1!, ..., 1/top!`` mod p (``top < p``)."""
    fact = [1] * (top + 1)
    for i in range(1, top + 1):
        fact[i] = fact[i - 1] * i % prime
    inv = [1] * (top + 1)
    inv[top] = pow(fact[top], prime - 2, prime)
    for i in range(top, 0, -1):
        inv[i - 1] = inv[i] * i % prime
    return np.array(inv, dtype=np.int64)


def lagrange_matrix(
    nodes: Sequence[int] | FieldArray, points: Sequence[int] | FieldArray, prime: int
) -> FieldArray:
    """Matrix ``M`` (len(points), len(nodes)) with ``M[j, k] = l_k(points[j])``.

    ``l_k`` is the Lagrange basis polynomial over ``nodes``:
    ``l_k(z) = prod_{m != k} (z - x_m) / (x_k - x_m)``. For a polynomial ``u`` of degree
    ``< len(nodes)``, ``u(points) = M @ u(nodes)``. Barycentric form:
    ``l_k(z) = g(z) * w_k / (z - x_k)`` with ``g(z) = prod_m (z - x_m)`` and the weights
    of :func:`barycentric_weights`; a point equal to a node gets the unit row. Cost:
    O(len(nodes) * (len(nodes) + len(points))) vectorized multiplications.

    Raises:
        ValueError: if the nodes are not distinct mod p.
    """
    x = _as_field(np.asarray(nodes, dtype=object), prime)
    z = _as_field(np.asarray(points, dtype=object), prime)
    weights = barycentric_weights(x, prime)
    diffs = np.mod(z[:, None] - x[None, :], prime)  # (points, nodes)
    hit = diffs == 0
    on_node = hit.any(axis=1)
    safe = np.where(hit, 1, diffs)
    full = row_products(safe, prime)
    out = mul(mul(full[:, None], inverses(safe, prime), prime), weights[None, :], prime)
    out[on_node] = hit[on_node].astype(np.int64)
    return out


def times_pow2(x: FieldArray, bits: int, prime: int) -> FieldArray:
    """``x * 2**bits mod p`` for ``x`` in ``[0, p)``; for ``p = 2**61 - 1`` a 61-bit rotation."""
    if prime != MERSENNE_61:
        return mul(x, pow(2, bits, prime), prime)
    bits %= 61
    keep = 61 - bits
    return ((x & ((1 << keep) - 1)) << bits) | (x >> keep)


def field_sum(values: FieldArray, prime: int) -> FieldArray:
    """``sum(values, axis=-1) mod p`` for entries in ``[0, p)``, fewer than ``2**31`` terms."""
    if prime < _NARROW:
        total: FieldArray = np.mod(values.sum(axis=-1, dtype=np.int64), prime)
        return total
    high = np.mod((values >> 31).sum(axis=-1, dtype=np.int64), prime)
    low: FieldArray = np.mod((values & ((1 << 31) - 1)).sum(axis=-1, dtype=np.int64), prime)
    low += times_pow2(high, 31, prime)
    low -= prime * (low >= prime)
    return low


def mulsum(a: ArrayLike, b: ArrayLike, prime: int) -> FieldArray:
    """``sum(a * b, axis=-1) mod p`` (broadcasting), fewer than ``2**31`` terms."""
    return field_sum(mul(a, b, prime), prime)


def matmul(field: PrimeField, a: FieldArray, b: FieldArray) -> FieldArray:
    """``(a @ b) mod p`` for ``a`` (m, k) and ``b`` (k, L), exact for every field.

    Built for the decode shapes (a structured matrix times long result vectors) and the
    distance stage. Narrow fields (``p < 2**31``): :func:`crypto.field.narrow_product`,
    two float64 products' worth of GEMM. Wide fields: :func:`_wide_matmul`, at most
    nine (fewer when the entries are small, e.g. a 0/1 membership matrix).
    """
    a = np.asarray(a, dtype=np.int64)
    b = np.asarray(b, dtype=np.int64)
    if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:
        raise ValueError(f"Argument 'b' has shape {b.shape}; cannot multiply by {a.shape}")
    if field.prime < _NARROW:
        return narrow_product(prepare_narrow(a, field.prime), b)
    return _wide_matmul(a, b, field.prime)


def _signed_limbs(
    x: NDArray[np.int64], prime: int, count: int | None = None
) -> NDArray[np.float64]:
    """Signed 21-bit limbs of the centred values ``c`` of ``x``: (count, *x.shape) float64.

    ``c = sum_i l_i 2**(21 i)`` with ``l_i`` in ``[-2**20, 2**20)`` for ``i < count - 1``
    and ``|l_{count-1}| <= 2**20``. ``count`` defaults to the fewest (1 to 3) that hold
    ``max |c|``; 3 always do (``|c| <= (p-1)/2 < 2**61``).
    """
    c = np.where(x > (prime - 1) // 2, x - prime, x)
    if count is None:
        peak = int(np.abs(c).max()) if c.size else 0
        count = 1
        while peak >= 1 << (_LIMB_HALF_BITS + _WIDE_BITS * (count - 1)):
            count += 1
    limbs = np.empty((count, *x.shape), dtype=np.float64)
    for i in range(count - 1):
        low = c + _LIMB_HALF
        low &= _LIMB_MASK
        low -= _LIMB_HALF
        limbs[i] = low
        c -= low
        c >>= _WIDE_BITS
    limbs[count - 1] = c
    return limbs


def _unsigned_limbs(
    x: NDArray[np.int64], count: int, buffer: NDArray[np.float64]
) -> NDArray[np.float64]:
    """``x = sum_j limbs[j] 2**(21 j)``, limbs in ``[0, 2**21)``: (count, *x.shape) in ``buffer``.

    A transposed view ``x`` (``x.T`` C-contiguous) is read along memory and the limbs
    come back as transposed views too.
    """
    rows, cols = x.shape
    transposed = not x.flags.c_contiguous and x.T.flags.c_contiguous
    if transposed:
        stacked = buffer[: count * rows * cols].reshape(count, cols, rows)
        source = x.T
    else:
        stacked = buffer[: count * rows * cols].reshape(count, rows, cols)
        source = x
    for j in range(count):
        part = source >> (_WIDE_BITS * j) if j else source
        np.bitwise_and(part, _LIMB_MASK, out=stacked[j], casting="unsafe")
    return stacked.transpose(0, 2, 1) if transposed else stacked


def _reduce_signed_inplace(g: NDArray[np.int64], prime: int) -> None:
    """``g mod p`` in place for ``|g| < 2**53``: one correction when ``p`` exceeds ``|g|``."""
    if prime > _EXACT:
        sign = g >> 63  # -1 where negative, else 0
        sign &= prime
        g += sign
    else:
        np.mod(g, prime, out=g)


def _wide_matmul(a: FieldArray, b: FieldArray, prime: int) -> FieldArray:
    """Exact ``a @ b mod p`` for ``p < 2**62`` on float64 GEMMs (schoolbook on 21-bit limbs).

    Centred ``a = sum_i a_i 2**(21 i)`` (signed limbs, ``|a_i| <= 2**20``, ``la <= 3`` of
    them) and ``b = sum_j b_j 2**(21 j)`` (``0 <= b_j < 2**21``, ``lb <= 3``), so
    ``a @ b = sum_s 2**(21 s) D_s`` with ``D_s = sum_{i+j=s} a_i @ b_j``. One GEMM of
    the stacked ``[a_0; ..; a_{la-1}]`` with each ``b_j`` gives every ``a_i @ b_j``
    (``la * lb <= 9`` plain products; a 0/1 matrix has ``la = 1``). **Exactness:** a
    block of at most 1365 inner rows makes every term below ``2**41`` and every ``D_s``
    (at most 3 products) below ``3 * 1365 * 2**41 < 2**53``, exact in float64 in any
    summation order. ``D_s`` are combined by Horner's rule with :func:`times_pow2` (a
    61-bit rotation for ``p = 2**61 - 1``) and reduced in int64.
    """
    m, k = a.shape
    cols = b.shape[1]
    out = np.zeros((m, cols), dtype=np.int64)
    if m == 0 or cols == 0 or k == 0:
        return out
    if cols >= 2 * k:  # long results: three GEMM outputs beat five (see the docstrings)
        return _wide_matmul_inner(a, b, prime)
    left_all = _signed_limbs(a, prime)
    la = left_all.shape[0]
    lb = max(1, -(-int(b.max()).bit_length() // _WIDE_BITS)) if b.size else 1
    block_rows = min(k, _INNER_BLOCK)
    tile = max(64, min(cols, _TILE_ELEMENTS // (lb * (block_rows + la * m))))
    scratch = scratch_buffer(lb * (block_rows + la * m) * tile)
    limb_buf = scratch[: lb * block_rows * tile]
    product_buf = scratch[lb * block_rows * tile :]
    acc_buf = np.empty((m, tile), dtype=np.int64)
    term_buf = np.empty((m, tile), dtype=np.int64)
    for r0 in range(0, k, _INNER_BLOCK):
        r1 = min(k, r0 + _INNER_BLOCK)
        left = left_all[:, :, r0:r1].reshape(la * m, r1 - r0)
        for c0 in range(0, cols, tile):
            c1 = min(cols, c0 + tile)
            width = c1 - c0
            right = _unsigned_limbs(b[r0:r1, c0:c1], lb, limb_buf)
            products = product_buf[: lb * la * m * width].reshape(lb, la * m, width)
            np.matmul(left, right, out=products)  # products[j, i-th block] = a_i @ b_j
            acc, term = acc_buf[:, :width], term_buf[:, :width]
            for s in range(la + lb - 2, -1, -1):
                first = max(0, s - lb + 1)
                total = products[s - first, first * m : (first + 1) * m]
                for i in range(first + 1, min(la, s + 1)):
                    total += products[s - i, i * m : (i + 1) * m]  # exact: below 2**53
                target = acc if s == la + lb - 2 else term
                np.copyto(target, total, casting="unsafe")
                _reduce_signed_inplace(target, prime)
                if s == la + lb - 2:
                    continue
                acc[:] = times_pow2(acc, _WIDE_BITS, prime)
                acc += term
                acc -= prime * (acc >= prime)
            block = out[:, c0:c1]
            block += acc
            block -= prime * (block >= prime)
    return out


def _unsigned_limbs_fixed(x: NDArray[np.int64], bits: int, out: list[NDArray[np.float64]]) -> None:
    """``x = out[0] + out[1] * 2**bits + out[2] * 2**(2 bits)``, limbs in ``[0, 2**bits)``."""
    mask = (1 << bits) - 1
    np.bitwise_and(x, mask, out=out[0], casting="unsafe")
    high = x >> bits
    np.bitwise_and(high, mask, out=out[1], casting="unsafe")
    np.right_shift(high, bits, out=out[2], casting="unsafe")


def _right_operand(
    b: NDArray[np.int64], bits: int, buffer: NDArray[np.float64], transposed: bool
) -> NDArray[np.float64]:
    """``[b_0; b_1; b_2]`` (3k, w): the limbs of a block ``b`` (k, w), written into ``buffer``.

    If ``b`` is a transposed view (``b.T`` contiguous, as in ``coeffs @ Y.T``), the limbs
    are laid out so that both reading ``b`` and the GEMM run along memory.
    """
    k, w = b.shape
    if transposed:
        stacked = buffer[: 3 * k * w].reshape(w, 3, k)
        _unsigned_limbs_fixed(b.T, bits, [stacked[:, j, :] for j in range(3)])
        return stacked.reshape(w, 3 * k).T
    stacked = buffer[: 3 * k * w].reshape(3, k, w)
    _unsigned_limbs_fixed(b, bits, [stacked[j] for j in range(3)])
    return stacked.reshape(3 * k, w)


def _reduce_signed_copy(g: NDArray[np.int64], prime: int) -> FieldArray:
    """``g mod p`` for ``|g| < 2**53``: one correction when ``p`` exceeds ``|g|``."""
    if prime > _EXACT:
        g += prime * (g < 0)
        return g
    return np.mod(g, prime)


def _wide_matmul_inner(a: FieldArray, b: FieldArray, prime: int) -> FieldArray:
    """Exact ``a @ b mod p`` (wide ``p``) for long right operands: three GEMM outputs.

    Write ``b = sum_j b_j 2**(21 j)`` (``j = 0..2``, limbs in ``[0, 2**21)``) and
    ``a_j = a * 2**(21 j) mod p``, each split into centred signed limbs ``a_{j,i}``
    (``|a_{j,i}| <= 2**20``): ``a @ b = sum_i 2**(21 i) G_i`` with
    ``G_i = [a_{0,i} | a_{1,i} | a_{2,i}] @ [b_0; b_1; b_2]``, all three from one GEMM of
    the stacked left operand (3m, 3k) (9 times the plain product), combined by Horner's
    rule with :func:`times_pow2`. Every term is below ``2**41`` in magnitude, so blocks of
    1365 inner rows sum exactly in float64 (``3 * 1365 * 2**41 < 2**53``). Its left
    operand costs nine limb matrices, its result three: :func:`_wide_matmul` picks it
    when the result is larger than the left operand.
    """
    m, k = a.shape
    cols = b.shape[1]
    out = np.zeros((m, cols), dtype=np.int64)
    if m == 0 or cols == 0 or k == 0:
        return out
    bits, count = _WIDE_BITS, 3
    # split[j][i] = a_{j,i}
    split = [_signed_limbs(times_pow2(a, bits * j, prime), prime, count) for j in range(3)]
    transposed = not b.flags.c_contiguous and b.T.flags.c_contiguous
    block_rows = min(k, _INNER_BLOCK)
    tile = max(64, min(cols, _TILE_ELEMENTS // (3 * block_rows)))
    buffer = np.empty(3 * block_rows * tile, dtype=np.float64)
    for r0 in range(0, k, _INNER_BLOCK):
        r1 = min(k, r0 + _INNER_BLOCK)
        left = np.vstack(
            [np.hstack([split[j][i][:, r0:r1] for j in range(3)]) for i in range(count)]
        )
        for c0 in range(0, cols, tile):
            c1 = min(cols, c0 + tile)
            right = _right_operand(b[r0:r1, c0:c1], bits, buffer, transposed)
            g = (left @ right).astype(np.int64)  # exact: integers below 2**53
            acc = _reduce_signed_copy(g[(count - 1) * m :], prime)
            for i in range(count - 2, -1, -1):
                acc = times_pow2(acc, _WIDE_BITS, prime)
                acc += g[i * m : (i + 1) * m]
                acc = _reduce_signed_copy(acc, prime)
                acc -= prime * (acc >= prime)
            block = out[:, c0:c1]
            block += acc
            block -= prime * (block >= prime)
    return out
