"""Vectorized arithmetic in a prime field GF(p) on numpy ``int64`` arrays.

Field elements are stored as ``int64`` with values in ``[0, p)``. Two regimes:

* **narrow** (``p < 2**31``): products of two elements fit in ``int64``, so element-wise
  multiplication is one ``int64`` multiply and ``%``. Matrix products use float64 BLAS
  with a limb split (:func:`narrow_product`): the right operand is cut as
  ``b = b_h * 2**16 + b_l`` (``b_h < 2**15``, ``b_l < 2**16``), the left operand is
  centred (``|a| <= (p-1)/2 < 2**30``) and the product is one GEMM of
  ``[a * 2**16 mod p | a]`` with ``[b_h ; b_l]`` per inner block. The blocks are cut
  from the left operand's actual rows (:func:`narrow_blocks`) so that every partial sum
  stays below ``2**53``: exact in float64 whatever the summation order. One reduction
  per block, ``s - rint(s / p) * p``, is exact and lands in ``(-p, p)``. The GEMM does
  twice the work of a float64 product of the same shape, which is the floor for
  float64: a product of two residues below ``2**31`` has up to 62 bits, a double 53.
* **wide** (``2**31 <= p < 2**62``): exact Python-integer arithmetic through numpy
  ``object`` arrays. Used for the degree-2 distance stage, whose data is small
  (reduced prompts, ``r`` about 128) but whose values need a wide field.

``galois`` is the reference implementation: the tests compare every operation here with
``galois.GF(p)``; small dense linear algebra lives in :mod:`crypto.linalg`.
"""

from __future__ import annotations

import functools
import threading
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from secfpp.crypto.errors import ParameterError

__all__ = [
    "MAX_PRIME",
    "NARROW_LIMIT",
    "FieldArray",
    "PreparedLeft",
    "PrimeField",
    "is_prime",
    "narrow_blocks",
    "narrow_product",
    "prepare_narrow",
    "scratch_buffer",
]

FieldArray = NDArray[np.int64]
NARROW_LIMIT = 2**31
MAX_PRIME = 2**62
_LIMB_BITS = 16
_LIMB_MASK = (1 << _LIMB_BITS) - 1
_BUDGET = 2**53 - 2**32  # largest |sum| of one exact block (narrow_blocks)
_TILE_ELEMENTS = 1 << 20  # float64 entries of the work buffers of one column tile (8 MiB)


@functools.lru_cache(maxsize=256)
def is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for ``n < 3.3 * 10**24`` (fixed witness set).

    Cached: every :class:`FieldSpec` and :class:`PrimeField` checks its modulus, and the
    coordinator builds them from a federation's config on every request (about 0.2 ms a
    check for a 61-bit prime; a federation uses one or two moduli)."""
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)
    for q in small:
        if n % q == 0:
            return n == q
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in small:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


class PrimeField:
    """GF(p) for a prime ``p < 2**62``, with numpy fast paths.

    >>> F = PrimeField(2**31 - 1)
    >>> int(F.mul(F.asarray([3]), F.asarray([-1]))[0]) == 2**31 - 4
    True
    """

    def __init__(self, prime: int) -> None:
        if not isinstance(prime, int) or isinstance(prime, bool):
            raise ParameterError("prime", f"must be an int, not {type(prime).__name__}")
        if not 2 < prime < MAX_PRIME:
            raise ParameterError("prime", f"must be in (2, 2**62), not {prime}")
        if not is_prime(prime):
            raise ParameterError("prime", f"must be prime, not {prime}")
        self.prime = prime
        self.half = (prime - 1) // 2
        self.narrow = prime < NARROW_LIMIT

    def __repr__(self) -> str:
        return f"PrimeField({self.prime})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, PrimeField) and other.prime == self.prime

    def __hash__(self) -> int:
        return hash(("PrimeField", self.prime))

    # -- conversions -----------------------------------------------------------------
    def asarray(self, values: ArrayLike) -> FieldArray:
        """Reduce integers (any sign, any size) into ``[0, p)`` as int64."""
        arr = np.asarray(values)
        if arr.dtype == object:
            return np.asarray(np.mod(arr, self.prime), dtype=np.int64)
        if not np.issubdtype(arr.dtype, np.integer):
            raise ParameterError("values", f"must be integers, not dtype {arr.dtype}")
        arr = arr.astype(np.int64, copy=False)
        if arr.size and -self.prime <= int(arr.min()) and int(arr.max()) < self.prime:
            # The common case (quantized values, |v| < p): one conditional add, no division.
            out: FieldArray = np.right_shift(arr, 63)  # -1 where negative, else 0
            out &= self.prime
            out += arr
            return out
        return np.asarray(np.mod(arr, self.prime), dtype=np.int64)

    def check(self, values: ArrayLike, name: str = "values") -> FieldArray:
        """Return ``values`` as int64 if every entry is a field element, else raise."""
        arr = np.asarray(values)
        if not np.issubdtype(arr.dtype, np.integer):
            raise ParameterError(name, f"must be an integer array, not dtype {arr.dtype}")
        arr = arr.astype(np.int64, copy=False)
        if arr.size and (int(arr.min()) < 0 or int(arr.max()) >= self.prime):
            raise ParameterError(name, f"must have entries in [0, {self.prime})")
        return arr

    def centered(self, values: FieldArray) -> FieldArray:
        """Signed representatives in ``[-(p-1)/2, (p-1)/2]`` (``v > (p-1)/2`` -> ``v - p``)."""
        return np.where(values > self.half, values - self.prime, values)

    def _obj(self, values: ArrayLike) -> NDArray[Any]:
        return np.asarray(values, dtype=np.int64).astype(object)

    def _from_obj(self, values: NDArray[Any] | int) -> FieldArray:
        return np.asarray(np.asarray(values, dtype=object) % self.prime, dtype=np.int64)

    # -- element-wise ----------------------------------------------------------------
    def add(self, a: FieldArray, b: FieldArray) -> FieldArray:
        """``(a + b) mod p`` (both in ``[0, p)``, so the sum stays below ``2**63``)."""
        s = np.add(a, b, dtype=np.int64)
        s -= self.prime * (s >= self.prime)
        return s

    def sub(self, a: FieldArray, b: FieldArray) -> FieldArray:
        """``(a - b) mod p``."""
        s = np.subtract(a, b, dtype=np.int64)
        s += self.prime * (s < 0)
        return s

    def neg(self, a: FieldArray) -> FieldArray:
        """``-a mod p``."""
        return np.where(a == 0, 0, self.prime - a).astype(np.int64)

    def mul(self, a: FieldArray, b: FieldArray) -> FieldArray:
        """``(a * b) mod p`` element-wise, with broadcasting."""
        if self.narrow:
            return np.mod(np.multiply(a, b, dtype=np.int64), self.prime)
        return self._from_obj(self._obj(a) * self._obj(b))

    def scale(self, a: FieldArray, c: int) -> FieldArray:
        """``(c * a) mod p`` for an integer scalar ``c`` (any sign)."""
        return self.mul(a, np.full((), c % self.prime, dtype=np.int64))

    def square_sum(self, a: FieldArray, axis: int = -1) -> FieldArray:
        """``sum(a**2) mod p`` along ``axis``."""
        if self.narrow:
            sq = np.mod(np.multiply(a, a, dtype=np.int64), self.prime)
            return self.sum(sq, axis=axis)
        obj = self._obj(a)
        return self._from_obj(np.sum(obj * obj, axis=axis))

    def sum(self, a: FieldArray, axis: int | None = None) -> FieldArray:
        """``sum(a) mod p`` along ``axis`` (exact for fewer than ``2**32`` terms if narrow)."""
        if self.narrow:
            total = np.sum(np.asarray(a, dtype=np.int64), axis=axis, dtype=np.int64)
            return np.asarray(np.mod(total, self.prime), dtype=np.int64)
        return self._from_obj(np.sum(self._obj(a), axis=axis))

    def inv(self, a: int) -> int:
        """Multiplicative inverse of a nonzero scalar."""
        a %= self.prime
        if a == 0:
            raise ZeroDivisionError("0 has no inverse in GF(p)")
        return pow(a, self.prime - 2, self.prime)

    # -- matrix products -------------------------------------------------------------
    def prepare_left(self, a: FieldArray) -> PreparedLeft:
        """Precompute the float64 operand of :meth:`matmul` for a matrix used many times.

        For ``a`` (n, k) (narrow fields) this cuts the inner dimension into blocks
        ``[k0, k1)`` whose sums are exact (:func:`narrow_blocks`) and stacks, per block,
        ``[centred(a * 2**16 mod p) | centred(a)]`` (n, 2 (k1 - k0)) as float64.
        """
        a = np.asarray(a, dtype=np.int64)
        if a.ndim != 2:
            raise ParameterError("a", f"must be a 2-D matrix, not shape {a.shape}")
        if not self.narrow:
            raise ParameterError("a", "prepared operands exist only for narrow fields")
        return prepare_narrow(a, self.prime)

    def matmul(self, a: FieldArray | PreparedLeft, b: FieldArray) -> FieldArray:
        """``(a @ b) mod p`` for ``a`` (n, k) and ``b`` (k, L); returns (n, L).

        ``a`` may be a :class:`PreparedLeft` from :meth:`prepare_left` (narrow fields).
        Narrow fields run one float64 GEMM of inner dimension ``2k`` per exact block
        (:func:`narrow_product`); wide fields exact Python integers.
        """
        b = np.asarray(b, dtype=np.int64)
        shape = a.shape if isinstance(a, PreparedLeft) else np.shape(a)
        if len(shape) != 2 or b.ndim != 2 or shape[1] != b.shape[0]:
            raise ParameterError("b", f"shapes {shape} and {b.shape} cannot be multiplied")
        if not self.narrow:
            if isinstance(a, PreparedLeft):
                raise ParameterError("a", "prepared operands exist only for narrow fields")
            return self._from_obj(self._obj(a) @ self._obj(b))
        left = a if isinstance(a, PreparedLeft) else self.prepare_left(np.asarray(a))
        if left.prime != self.prime:
            raise ParameterError("a", f"was prepared for GF({left.prime}), not GF({self.prime})")
        return narrow_product(left, b)


class PreparedLeft:
    """A left matrix operand prepared once for repeated narrow-field products.

    Attributes:
        prime: the field's ``p < 2**31``.
        shape: ``(n, k)`` of the matrix it represents.
        spans: the exact inner blocks ``(k0, k1)``, covering ``[0, k)`` in order.
        blocks: per span, ``[centred(a * 2**16 mod p) | centred(a)][:, k0:k1]`` stacked,
            float64 of shape (n, 2 (k1 - k0)).
    """

    __slots__ = ("blocks", "prime", "shape", "spans")

    def __init__(
        self,
        prime: int,
        shape: tuple[int, ...],
        spans: tuple[tuple[int, int], ...],
        blocks: tuple[NDArray[np.float64], ...],
    ) -> None:
        self.prime = prime
        self.shape = shape
        self.spans = spans
        self.blocks = blocks


def narrow_blocks(high: FieldArray, low: FieldArray, prime: int) -> tuple[tuple[int, int], ...]:
    """Split the inner dimension into blocks whose float64 sums are exact.

    ``high`` and ``low`` (n, k) are the centred left limbs ``a * 2**16 mod p`` and ``a``
    (``|.| <= (p-1)/2``). A right entry ``b`` in ``[0, p)`` enters the product as its
    limbs ``b >> 16 <= h = (p-1) >> 16`` and ``b & 0xFFFF <= l = min(p-1, 2**16-1)``, so
    row ``i`` of block ``[k0, k1)`` sums terms bounded in magnitude by
    ``w_ij = |high_ij| h + |low_ij| l`` (``< 2**30 * 3 * 2**15``). Each block is the
    longest run (greedy, from the left) with ``sum_j w_ij <= BUDGET`` for every row,
    ``BUDGET = 2**53 - 2**32``: every partial sum of the GEMM is an integer of magnitude
    below ``2**53``, hence exact in float64 whatever the summation order, and adding a
    previous block's remainder (below ``p < 2**31`` in magnitude) stays exact too.
    """
    n, k = low.shape
    if k == 0:
        return ()
    h, lo = (prime - 1) >> _LIMB_BITS, min(prime - 1, _LIMB_MASK)
    weights = np.abs(high) * h + np.abs(low) * lo  # int64, each < 2**47
    totals = np.cumsum(weights, axis=1)  # int64: k * 2**47 < 2**63 for k < 2**16
    spans = []
    start = 0
    while start < k:
        base = totals[:, start - 1] if start else np.zeros(n, dtype=np.int64)
        peak = (totals[:, start:] - base[:, None]).max(axis=0) if n else np.zeros(k - start)
        stop = start + int(np.searchsorted(peak, _BUDGET, side="right"))
        stop = max(stop, start + 1)  # one column alone is below 2**47
        spans.append((start, stop))
        start = stop
    return tuple(spans)


def prepare_narrow(a: FieldArray, prime: int) -> PreparedLeft:
    """:meth:`PrimeField.prepare_left` for ``a`` (n, k) with entries in ``[0, p)``."""
    if prime >= NARROW_LIMIT:
        raise ParameterError("prime", f"must be below 2**31 for this product, not {prime}")
    half = (prime - 1) // 2
    low = np.where(a > half, a - prime, a)
    high = np.mod(a * (1 << _LIMB_BITS), prime)
    high = np.where(high > half, high - prime, high)
    spans = narrow_blocks(high, low, prime)
    blocks = tuple(
        np.hstack([high[:, k0:k1], low[:, k0:k1]]).astype(np.float64) for k0, k1 in spans
    )
    return PreparedLeft(prime, a.shape, spans, blocks)


def narrow_product(left: PreparedLeft, b: FieldArray) -> FieldArray:
    """``(a @ b) mod p`` for a prepared ``a`` (n, k) and ``b`` (k, L) in ``[0, p)``, ``p < 2**31``.

    **Exactness.** With ``b = 2**16 b_h + b_l`` (``b_h = b >> 16 < 2**15``,
    ``b_l = b & 0xFFFF``) and the centred ``a' = a * 2**16 mod p``, ``|a|, |a'| <= (p-1)/2``::

        a @ b = a' @ b_h + a @ b_l  (mod p),

    one float64 GEMM ``[a' | a] @ [b_h ; b_l]`` per inner block of
    :func:`narrow_blocks`. Every block's sums are integers below ``2**53 - 2**32`` in
    magnitude, so the GEMM returns them exactly (in any summation order, with or without
    FMA). The remainder ``s - rint(s / p) * p`` is exact (``rint(s/p) * p`` is an integer
    below ``2**53``) and lies in ``(-p, p)``: the computed ``s * (1/p)`` is within
    ``2**-30`` of ``s / p``, so ``|s - q p| <= p/2 + p 2**-30``. Blocks after the first
    add their exact sums to that remainder (still below ``2**53``), and the last
    remainder is moved into ``[0, p)`` in int64.

    **Cost.** Two float64 products' worth of GEMM (inner dimension ``2k``) plus, per
    entry, two limb extractions of ``b`` and about eight passes over the result. Two is
    the floor while float64 GEMM is the only fast product numpy has (no integer BLAS): a
    single GEMM is exact only if ``k * max|a| * max|b| < 2**53``, and residues of a
    31-bit prime have products of up to 60 bits even centred. So this runs at most at
    half the speed of a float64 GEMM of the same shape; measured ratios are in
    docs/results/field-products.md (``python -m bench.crypto.field_products``).
    """
    b = np.asarray(b, dtype=np.int64)
    n, k = left.shape
    if b.ndim != 2 or b.shape[0] != k:
        raise ParameterError("b", f"shapes {left.shape} and {b.shape} cannot be multiplied")
    cols = b.shape[1]
    if n == 0 or cols == 0 or k == 0:
        return np.zeros((n, cols), dtype=np.int64)
    out = np.empty((n, cols), dtype=np.int64)  # every column tile is written below
    p = float(left.prime)
    inv_p = 1.0 / p
    widest = max(k1 - k0 for k0, k1 in left.spans)
    transposed = not b.flags.c_contiguous and b.T.flags.c_contiguous
    tile = max(64, min(cols, _TILE_ELEMENTS // (2 * widest + 2 * n)))
    scratch = scratch_buffer((2 * widest + 2 * n) * tile)
    limbs_buf = scratch[: 2 * widest * tile]
    acc_buf = scratch[2 * widest * tile : (2 * widest + n) * tile].reshape(n, tile)
    tmp_buf = scratch[(2 * widest + n) * tile :].reshape(n, tile)
    for c0 in range(0, cols, tile):
        c1 = min(cols, c0 + tile)
        width = c1 - c0
        acc, tmp = acc_buf[:, :width], tmp_buf[:, :width]
        for index, ((k0, k1), block) in enumerate(zip(left.spans, left.blocks, strict=True)):
            limbs = _limbs(b[k0:k1, c0:c1], limbs_buf, transposed)
            if index == 0:
                np.matmul(block, limbs, out=acc)
            else:
                np.matmul(block, limbs, out=tmp)
                acc += tmp  # |acc| < p before: the sum stays below 2**53
            np.multiply(acc, inv_p, out=tmp)
            np.rint(tmp, out=tmp)
            tmp *= p
            acc -= tmp  # exact, in (-p, p)
        target = out[:, c0:c1]
        np.copyto(target, acc, casting="unsafe")
        sign = tmp.view(np.int64)
        np.right_shift(target, 63, out=sign)  # -1 where negative, else 0
        sign &= left.prime
        target += sign
    return out


_SCRATCH = threading.local()


def scratch_buffer(size: int) -> NDArray[np.float64]:
    """A float64 work buffer of at least ``size`` entries, kept per thread and reused.

    Fresh multi-megabyte temporaries cost a page fault per 4 KiB page on every call
    (see :mod:`secfpp.process.memory`), more than the arithmetic on them; one buffer per thread,
    at most ``_TILE_ELEMENTS`` entries (8 MiB), is faulted in once. It holds limbs of
    the last product until the next one overwrites them: the process's own memory, which
    the threat model trusts (docs/protocol.md, section 2).
    """
    buffer: NDArray[np.float64] | None = getattr(_SCRATCH, "buffer", None)
    if buffer is None or buffer.size < size:
        buffer = np.empty(max(size, 1 << 16), dtype=np.float64)
        _SCRATCH.buffer = buffer
    return buffer[:size]


def _limbs(rows: FieldArray, buffer: NDArray[np.float64], transposed: bool) -> NDArray[np.float64]:
    """``[rows >> 16 ; rows & 0xFFFF]`` (2k, w) as float64 in ``buffer``.

    For a transposed view (``rows.T`` C-contiguous) the limbs are written along memory
    and the result is a transposed view too (BLAS takes either layout).
    """
    k, w = rows.shape
    if transposed:
        stacked = buffer[: 2 * k * w].reshape(w, 2 * k)
        np.right_shift(rows.T, _LIMB_BITS, out=stacked[:, :k], casting="unsafe")
        np.bitwise_and(rows.T, _LIMB_MASK, out=stacked[:, k:], casting="unsafe")
        return stacked.T
    stacked = buffer[: 2 * k * w].reshape(2 * k, w)
    np.right_shift(rows, _LIMB_BITS, out=stacked[:k], casting="unsafe")
    np.bitwise_and(rows, _LIMB_MASK, out=stacked[k:], casting="unsafe")
    return stacked
