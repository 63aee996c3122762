"""Vectorized arithmetic in a prime field GF(p) on numpy ``int64`` arrays.

Field elements are stored as ``int64`` with values in ``[0, p)``. Two regimes:

* **narrow** (``p < 2**31``): products of two elements fit in ``int64``, so element-wise
  multiplication is one ``int64`` multiply and ``%``. Matrix products use float64 BLAS
  with a limb split: with the left operand centred (``|a| <= (p-1)/2 < 2**30``) and the
  right operand split as ``b = b_hi * 2**16 + b_lo`` (``0 <= b_hi < 2**15``, ``b_lo``
  re-centred into ``[-2**15, 2**15)``), the product is one GEMM of the stacked left
  operand ``[a * 2**16 mod p | a]`` with ``[b_hi ; b_lo]``. Every term is below
  ``2**45``, so up to 128 rows of ``b`` per block are summed exactly in float64;
  reductions are ``x - floor(x / p) * p`` on exact integers. See :meth:`PrimeField.matmul`.
* **wide** (``2**31 <= p < 2**62``): exact Python-integer arithmetic through numpy
  ``object`` arrays. Used for the degree-2 distance stage, whose data is small
  (reduced prompts, ``r`` about 128) but whose values need a wide field.

``galois`` is the reference implementation: the tests compare every operation here with
``galois.GF(p)``; small dense linear algebra lives in :mod:`crypto.linalg`.
"""

from __future__ import annotations

from functools import cached_property
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from secfpp.crypto.errors import ParameterError

__all__ = ["MAX_PRIME", "NARROW_LIMIT", "FieldArray", "PreparedLeft", "PrimeField", "is_prime"]

FieldArray = NDArray[np.int64]
NARROW_LIMIT = 2**31
MAX_PRIME = 2**62
_LIMB_BITS = 16
_LIMB = float(1 << _LIMB_BITS)
_EXACT = 2**53
_TILE_ELEMENTS = 1 << 15  # float64 entries per work buffer (256 KiB)


def is_prime(n: int) -> bool:
    """Deterministic Miller-Rabin for ``n < 3.3 * 10**24`` (fixed witness set)."""
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
    @cached_property
    def _block(self) -> int:
        """Largest inner-dimension block whose float64 sums are exact (narrow fields).

        The stacked left operand has entries ``|a| <= (p-1)/2`` and the right limbs
        ``|b| <= 2**15``; a block of ``k`` rows of ``b`` contributes ``2k`` products,
        so ``2k * (p-1)/2 * 2**15 <= 2**53`` keeps every partial sum exact.
        """
        return max(1, _EXACT // (2 * self.half * (1 << (_LIMB_BITS - 1))))

    def prepare_left(self, a: FieldArray) -> PreparedLeft:
        """Precompute the float64 operand of :meth:`matmul` for a matrix used many times.

        For ``a`` (n, k) this stacks ``[centred(a * 2**16 mod p) | centred(a)]``
        (n, 2k) and the correction ``2**15 * rowsum(a) mod p`` (n,), so that
        ``a @ b = [a*2**16 | a] @ [b_hi ; b_lo - 2**15] + 2**15 * rowsum(a)  (mod p)``
        is a single GEMM with inner dimension ``2k``.
        """
        a = np.asarray(a, dtype=np.int64)
        if a.ndim != 2:
            raise ParameterError("a", f"must be a 2-D matrix, not shape {a.shape}")
        shifted = self.scale(a, 1 << _LIMB_BITS)
        blocks = []
        for start in range(0, a.shape[1], self._block):
            stop = start + self._block
            blocks.append(
                np.hstack(
                    [self.centered(shifted[:, start:stop]), self.centered(a[:, start:stop])]
                ).astype(np.float64)
            )
        half_limb = 1 << (_LIMB_BITS - 1)
        correction = self.scale(self.sum(a, axis=1), half_limb).astype(np.float64)
        return PreparedLeft(self.prime, a.shape, tuple(blocks), correction)

    def matmul(self, a: FieldArray | PreparedLeft, b: FieldArray) -> FieldArray:
        """``(a @ b) mod p`` for ``a`` (n, k) and ``b`` (k, L); returns (n, L).

        ``a`` may be a :class:`PreparedLeft` from :meth:`prepare_left` (narrow fields).
        """
        b = np.asarray(b, dtype=np.int64)
        shape = a.shape if isinstance(a, PreparedLeft) else np.shape(a)
        if len(shape) != 2 or b.ndim != 2 or shape[1] != b.shape[0]:
            raise ParameterError("b", f"shapes {shape} and {b.shape} cannot be multiplied")
        if not self.narrow:
            if isinstance(a, PreparedLeft):
                raise ParameterError("a", "prepared operands exist only for narrow fields")
            return self._from_obj(self._obj(a) @ self._obj(b))
        left = a if isinstance(a, PreparedLeft) else self.prepare_left(a)
        if left.prime != self.prime:
            raise ParameterError("a", f"was prepared for GF({left.prime}), not GF({self.prime})")
        p = float(self.prime)
        inv_p = 1.0 / p
        n, cols = shape[0], b.shape[1]
        result = np.empty((n, cols), dtype=np.int64)
        # Column tiles keep the float64 work buffers small and cache-resident; fresh
        # large temporaries would cost page faults that dwarf the arithmetic.
        tile = max(64, min(cols, _TILE_ELEMENTS // max(n, 2 * min(self._block, b.shape[0]))))
        out = np.empty((n, tile), dtype=np.float64)
        prod = np.empty((n, tile), dtype=np.float64)
        tmp = np.empty((n, tile), dtype=np.float64)
        limbs_buf = np.empty((2 * min(self._block, b.shape[0]), tile), dtype=np.float64)
        for c0 in range(0, cols, tile):
            width = min(tile, cols - c0)
            o, pr, tm = out[:, :width], prod[:, :width], tmp[:, :width]
            o[:] = left.correction[:, None]
            for index, block in enumerate(left.blocks):
                rows = b[index * self._block : (index + 1) * self._block, c0 : c0 + width]
                k = rows.shape[0]
                limbs = limbs_buf[: 2 * k, :width]
                np.right_shift(rows, _LIMB_BITS, out=limbs[:k], casting="unsafe")
                np.bitwise_and(rows, (1 << _LIMB_BITS) - 1, out=limbs[k:], casting="unsafe")
                limbs[k:] -= 1 << (_LIMB_BITS - 1)
                np.matmul(block, limbs, out=pr)
                # pr holds exact integers below 2**53; reduce lazily into about [-p, 2p).
                _reduce_inplace(pr, p, inv_p, tm)
                o += pr
                _reduce_inplace(o, p, inv_p, tm)
            o[o < 0] += p
            o[o >= p] -= p
            result[:, c0 : c0 + width] = o
        return result


def _reduce_inplace(
    x: NDArray[np.float64], p: float, inv_p: float, tmp: NDArray[np.float64]
) -> None:
    """``x -= floor(x / p) * p`` in place; exact for integer ``|x| < 2**53``.

    ``floor(x * (1/p))`` may be off by one, so the result lies in ``[-p, 2p)``.
    """
    np.multiply(x, inv_p, out=tmp)
    np.floor(tmp, out=tmp)
    tmp *= p
    x -= tmp


class PreparedLeft:
    """A left matrix operand prepared once for repeated narrow-field products."""

    __slots__ = ("blocks", "correction", "prime", "shape")

    def __init__(
        self,
        prime: int,
        shape: tuple[int, ...],
        blocks: tuple[NDArray[np.float64], ...],
        correction: NDArray[np.float64],
    ) -> None:
        self.prime = prime
        self.shape = shape
        self.blocks = blocks
        self.correction = correction
